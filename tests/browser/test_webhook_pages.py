"""Webhook pages in Chromium: a release manager adds a webhook through the form and reads its
delivery log after a real delivery to a local receiver; other roles have no way in."""

import pytest

from audit.services import audit_record
from core.sealed import unseal
from notifications.deliveries import delivery_attempt
from notifications.models import Delivery, Webhook
from notifications.outbox import outbox_scan
from tests.notifications.receiver import Receiver

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SECRET = "browser-secret-0123456789"


def _sign_in(page, live_server, username: str) -> None:
    page.goto(f"{live_server.url}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", f"pw-{username}")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")


def test_a_release_manager_adds_a_webhook_and_watches_its_deliveries(live_server, page, make_user):
    make_user("rita", role="release-managers")
    make_user("ada", role="algorithm")
    _sign_in(page, live_server, "ada")
    assert page.locator("[data-testid=webhook-link]").count() == 0
    assert page.goto(f"{live_server.url}/webhooks/").status == 403
    page.context.clear_cookies()

    with Receiver(statuses=[503]) as receiver:
        _sign_in(page, live_server, "rita")
        page.click("[data-testid=webhook-link]")
        page.fill("#url", receiver.url)
        page.fill("#secret", SECRET)
        page.check("input[name=events][value='alert.fired']")
        page.select_option("#min_severity", "warning")
        page.fill("#description", "on-call")
        page.click("[data-testid=webhook-form] button[type=submit]")
        page.wait_for_selector("[data-testid=delivery-table]")
        assert SECRET not in page.content()
        hook = Webhook.objects.get()
        assert (hook.events, hook.min_severity) == (["alert.fired"], "warning")
        assert unseal(hook.secret_sealed) == SECRET

        details = {"kind": "node_down", "severity": "critical", "summary": "n1 stopped answering"}
        audit_record(actor=None, action="alert.fired", details=details)
        [delivery_id] = outbox_scan()
        assert delivery_attempt(delivery_id=delivery_id) is not None  # 503: retried later
        page.reload()
        row = page.inner_text("[data-testid=delivery-row]")
        assert "pending" in row and "HTTP 503" in row and "n1 stopped answering" in row
        Delivery.objects.filter(pk=delivery_id).update(next_attempt_at=hook.created_at)
        assert delivery_attempt(delivery_id=delivery_id) is None
        page.reload()
        row = page.inner_text("[data-testid=delivery-row]")
        cells = page.locator("[data-testid=delivery-row] td")
        assert "delivered" in row and cells.nth(4).inner_text() == "2"  # attempts
        assert cells.nth(5).inner_text() == "200" and "HTTP 503" in cells.nth(6).inner_text()
        assert [r.status for r in receiver.requests] == [503, 200]
        assert all(r.is_signed_with(SECRET) for r in receiver.requests)

    page.click("text=Webhooks")
    assert "on-call" in page.inner_text("[data-testid=webhook-table]")
