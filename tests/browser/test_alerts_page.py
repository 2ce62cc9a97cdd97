"""Alerts in Chromium: the menu's badge counts firing alerts, the Alerts page filters and a
release manager acknowledges; the cluster, node and model pages show their open alerts,
and a node flagged for a leak says what helps."""

import pytest
from playwright.sync_api import expect

from deployments.services import cluster_create, node_create
from health.services import Finding, alert_fire
from models_registry.services import model_create, team_create

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _sign_in(page, url, who):
    page.goto(f"{url}/login/")
    page.fill("#id_username", who)
    page.fill("#id_password", f"pw-{who}")
    page.click("button[type=submit]")
    page.wait_for_url(f"{url}/")


def test_badge_filters_acknowledge_and_alerts_on_the_object_pages(live_server, page, make_user):
    ada, rita = make_user("ada", role="algorithm"), make_user("rita", role="release-managers")
    team_create(name="fraud", actor=ada)
    model_create(name="risk_score", team="fraud", actor=ada)
    cluster = cluster_create(actor=rita, name="prod", environment="production")
    node_create(cluster=cluster, actor=rita, name="n1", http_url="http://127.0.0.1:9")
    alert_fire(
        finding=Finding(
            kind="silent_failure",
            severity="critical",
            summary="risk_score v3 on prod: 100.0% of 40 requests failed at the router",
            cluster=cluster,
            model="risk_score",
            version=3,
        )
    )
    alert_fire(
        finding=Finding(
            kind="leak_suspected",
            severity="warning",
            summary="host memory of prod/n1 rose by 640 MiB over its last 5 cycles",
            cluster=cluster,
            node="n1",
            details={"remedy": "LD_PRELOAD tcmalloc or jemalloc; a rolling restart"},
        )
    )

    _sign_in(page, live_server.url, "ada")
    assert page.inner_text("[data-testid=alerts-badge]") == "2"
    page.click("[data-testid=alerts-link]")
    page.wait_for_url(f"{live_server.url}/alerts/")
    expect(page.locator("[data-testid=alert-row]")).to_have_count(2)
    assert page.locator("[data-testid=alert-ack]").count() == 0  # not a release manager
    page.select_option("#f-kind", "leak_suspected")
    page.click("[data-testid=alert-filters] button")
    page.wait_for_url("**/alerts/?*kind=leak_suspected*")
    expect(page.locator("[data-testid=alert-row]")).to_have_count(1)
    assert "LD_PRELOAD" in page.inner_text("[data-testid=alert-remedy]")

    page.goto(f"{live_server.url}/models/risk_score/")
    assert "100.0% of 40 requests" in page.inner_text("[data-testid=alerts-table]")
    page.goto(f"{live_server.url}/clusters/prod/")
    assert page.locator("[data-testid=alert-row]").count() == 2
    page.click("[data-testid=node-card] >> text=n1")
    page.wait_for_url("**/nodes/**")
    expect(page.locator("[data-testid=alert-row]")).to_have_count(1)
    assert "jemalloc" in page.inner_text("[data-testid=leak-remedy]")

    page.click("text=Sign out")
    _sign_in(page, live_server.url, "rita")
    page.click("[data-testid=alerts-link]")
    page.wait_for_url(f"{live_server.url}/alerts/")
    page.locator(
        "[data-testid=alert-row][data-kind=silent_failure] [data-testid=alert-ack]"
    ).click()
    page.wait_for_selector("[data-testid=alerts-badge]:text('1')")
    row = page.inner_text("[data-testid=alert-row][data-kind=silent_failure]")
    assert "acknowledged" in row and "by rita" in row
