"""The audit page in Chromium: filters by actor, object, action and time, exports the same
rows as CSV, and object pages link to their own rows."""

import csv
import io

import pytest

from audit.services import audit_record
from models_registry.services import model_create, team_create
from tests.browser.helpers import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_audit_page_filters_and_exports(live_server, page, make_user):
    ada, rita = make_user("ada", role="algorithm"), make_user("rita", role="release-managers")
    team_create(name="fraud", actor=ada)
    risk = model_create(name="risk_score", team="fraud", actor=ada)
    model_create(name="ticket_router", team="fraud", actor=ada)
    audit_record(actor=rita, action="model.note", obj=risk, details={"text": "=cmd|' /C calc'!A0"})
    base = live_server.url
    login(page, base, "rita")
    page.goto(f"{base}/audit/")
    assert (
        "4 events" in page.inner_text("[data-testid=audit-count]")
        or page.locator("[data-testid=audit-table] tbody tr").count() >= 4
    )

    page.select_option("#f-actor", "rita")
    page.click("[data-testid=audit-filters] button[type=submit]")
    rows = page.inner_text("[data-testid=audit-table]")
    assert "model.note" in rows and "team.created" not in rows
    assert page.inner_text("[data-testid=audit-count]") == "1 event"

    page.goto(f"{base}/audit/")
    page.fill("#f-action", "model.")
    page.select_option("#f-actor", "ada")
    page.click("[data-testid=audit-filters] button[type=submit]")
    assert page.inner_text("[data-testid=audit-count]") == "2 events"

    page.fill("#f-since", "2999-01-01")
    page.click("[data-testid=audit-filters] button[type=submit]")
    assert page.inner_text("[data-testid=audit-count]") == "0 events"
    page.fill("#f-since", "yesterday-ish")
    page.click("[data-testid=audit-filters] button[type=submit]")
    assert "since:" in page.inner_text("[role=alert]")

    page.goto(f"{base}/models/risk_score/")
    page.click("[data-testid=audit-link]")
    rows = page.inner_text("[data-testid=audit-table]")
    assert "model.created" in rows and "model.note" in rows and "ticket_router" not in rows

    with page.expect_download() as download:
        page.click("[data-testid=audit-csv]")
    text = open(download.value.path(), encoding="utf-8").read()
    lines = list(csv.reader(io.StringIO(text)))
    assert lines[0][:3] == ["time", "actor", "action"]
    assert sorted(r[2] for r in lines[1:]) == ["model.created", "model.note"]
    note = next(r for r in lines[1:] if r[2] == "model.note")
    assert note[1] == "rita" and "calc" in note[6]
