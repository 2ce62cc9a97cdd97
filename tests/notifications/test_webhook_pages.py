"""The webhook pages: release managers add, pause and delete webhooks and read each one's
delivery log; nobody else sees them."""

import pytest
from django.test import Client
from django.utils import timezone

from audit.services import audit_record
from notifications.models import Delivery, Webhook
from notifications.outbox import outbox_scan
from notifications.services import webhook_create

pytestmark = pytest.mark.django_db
SECRET = "page-secret-0123456789abc"


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_only_release_managers_see_the_pages_and_the_menu_link(make_user):
    rita = make_user("rita", role="release-managers")
    hook = webhook_create(
        actor=rita, url="http://127.0.0.1:9/h", secret=SECRET, events=["alert.fired"]
    )
    for role in ("algorithm", "managers"):
        other = _client(make_user(f"u-{role}", role=role))
        assert other.get("/webhooks/").status_code == 403
        assert other.get(f"/webhooks/{hook.pk}/").status_code == 403
        assert other.post(f"/webhooks/{hook.pk}/remove/").status_code == 403
        assert 'data-testid="webhook-link"' not in other.get("/models/").content.decode()
    assert Webhook.objects.filter(pk=hook.pk).exists()
    page = _client(rita).get("/models/").content.decode()
    assert 'data-testid="webhook-link"' in page


def test_a_release_manager_adds_a_webhook_and_reads_its_delivery_log(make_user):
    rita = make_user("rita", role="release-managers")
    client = _client(rita)
    form = {
        "url": "http://127.0.0.1:9/hooks",
        "secret": SECRET,
        "events": ["alert.fired", "deployment.failed"],
        "min_severity": "warning",
        "format": "slack",
        "description": "on-call channel",
    }
    added = client.post("/webhooks/", form)
    assert added.status_code == 302
    hook = Webhook.objects.get()
    assert hook.events == ["alert.fired", "deployment.failed"] and hook.format == "slack"
    details = {"kind": "node_down", "severity": "critical", "summary": "n1 is down"}
    audit_record(actor=None, action="alert.fired", details=details)
    [delivery_id] = outbox_scan()
    Delivery.objects.filter(pk=delivery_id).update(
        status="pending",
        attempts=2,
        response_code=502,
        last_error="HTTP 502: bad gateway",
        next_attempt_at=timezone.now(),
    )
    page = client.get(f"/webhooks/{hook.pk}/")
    text = page.content.decode()
    assert page.status_code == 200 and SECRET not in text
    assert "n1 is down" in text and "HTTP 502: bad gateway" in text and "502" in text
    assert text.count('data-testid="delivery-row"') == 1
    assert (
        client.get(f"/webhooks/{hook.pk}/?status=delivered")
        .content.decode()
        .count('data-testid="delivery-row"')
        == 0
    )
    listing = client.get("/webhooks/").content.decode()
    assert "http://127.0.0.1:9/hooks" in listing and "on-call channel" in listing
    assert SECRET not in listing


def test_a_refused_form_says_why_and_pausing_drops_events_meanwhile(make_user):
    rita = make_user("rita", role="release-managers")
    client = _client(rita)
    bad = {"url": "http://10.0.0.5:80/x", "secret": SECRET, "events": ["alert.fired"]}
    refused = client.post("/webhooks/", bad)
    assert refused.status_code == 400 and "outside the allowed networks" in refused.content.decode()
    no_events = client.post("/webhooks/", {**bad, "url": "http://127.0.0.1:9/x", "events": []})
    assert no_events.status_code == 400 and "events" in no_events.content.decode()
    assert not Webhook.objects.exists()
    hook = webhook_create(
        actor=rita, url="http://127.0.0.1:9/h", secret=SECRET, events=["alert.fired"]
    )
    assert client.post(f"/webhooks/{hook.pk}/toggle/").status_code == 302
    audit_record(actor=None, action="alert.fired", details={"severity": "critical"})
    assert outbox_scan() == []  # paused: not recorded
    assert client.post(f"/webhooks/{hook.pk}/toggle/").status_code == 302
    assert outbox_scan() == []  # resumed: only what happens from now on
    audit_record(actor=None, action="alert.fired", details={"severity": "critical"})
    assert len(outbox_scan()) == 1
    assert client.post(f"/webhooks/{hook.pk}/remove/").status_code == 302
    assert not Webhook.objects.exists() and not Delivery.objects.exists()
