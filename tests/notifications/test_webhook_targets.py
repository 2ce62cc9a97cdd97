"""Where a webhook may point: public addresses (or the allowed networks), never the control
plane's own database, Redis or broker; checked when stored and again when sent. The audit
trail keeps a webhook's host only, and shows webhook rows to release managers only."""

from urllib.parse import urlsplit

import pytest
from django.conf import settings as django_settings
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from audit.models import AuditEvent
from core.sealed import seal
from notifications.deliveries import delivery_attempt
from notifications.models import Delivery, Webhook

pytestmark = pytest.mark.django_db
SECRET = "a-long-shared-secret-0123456789"


def _rita(make_user) -> APIClient:
    api = APIClient()
    api.force_authenticate(make_user("rita", role="release-managers"))
    return api


def _create(api, url: str):
    body = {"url": url, "secret": SECRET, "events": ["alert.fired"]}
    return api.post("/api/v1/webhooks/", body, format="json")


def _own_services() -> list[str]:
    redis = urlsplit(django_settings.REDIS_URL)
    database = django_settings.DATABASES["default"]
    return [
        f"http://127.0.0.1:{redis.port or 6379}/hook",
        f"http://localhost:{redis.port or 6379}/hook",  # a name that resolves there
        f"http://127.0.0.2:{redis.port or 6379}/hook",  # another loopback address
        f"http://127.0.0.1:{database.get('PORT') or 5432}/hook",
    ]


def test_the_control_plane_own_services_are_refused_although_loopback_is_allowed(make_user):
    assert "127.0.0.0/8" in django_settings.SWITCHYARD_ALLOWED_TARGET_NETWORKS
    rita = _rita(make_user)
    for url in ["http://127.0.0.1:6379/hook", *_own_services()]:
        answer = _create(rita, url)
        assert answer.status_code == 400, url
        error = answer.json()["errors"][0]
        assert error["field"] == "url" and "control plane's own services" in error["message"]
    assert not Webhook.objects.exists()
    assert _create(rita, "http://127.0.0.1:9/hook").status_code == 201  # another port is fine


@pytest.mark.parametrize(
    "url",
    [
        "http://10.0.0.1/hook",
        "http://192.168.1.1:8080/hook",
        "http://169.254.169.254/latest/meta-data/",
        "http://127.0.0.1:9/hook",
        "http://localhost:9/hook",
        "http://[::1]:9/hook",
        "http://[fe80::1]:9/hook",
        "http://[::ffff:127.0.0.1]:9/hook",
        "http://0.0.0.0:9/hook",
        "http://224.0.0.1:9/hook",
    ],
)
def test_without_allowed_networks_only_public_addresses_are_targets(make_user, settings, url):
    settings.SWITCHYARD_ALLOWED_TARGET_NETWORKS = ""
    answer = _create(_rita(make_user), url)
    assert answer.status_code == 400, url
    assert answer.json()["errors"][0]["field"] == "url"


def test_a_stored_url_that_resolves_to_redis_is_refused_when_sent(make_user):
    """A row written before these checks (or straight to the database): the name is resolved
    and checked again at send time, and the delivery fails without a connection."""
    port = urlsplit(django_settings.REDIS_URL).port or 6379
    hook = Webhook.objects.create(
        url=f"http://localhost:{port}/x", secret_sealed=seal(SECRET), events=["alert.fired"]
    )
    delivery = Delivery.objects.create(
        webhook=hook,
        event="alert.fired",
        severity="critical",
        source="audit",
        source_id=1,
        payload={"event": "alert.fired"},
        next_attempt_at=timezone.now(),
    )
    delivery_attempt(delivery_id=delivery.pk)
    delivery.refresh_from_db()
    assert delivery.status == Delivery.Status.FAILED
    assert delivery.last_error.startswith("URL refused:")
    assert "control plane's own services" in delivery.last_error
    assert delivery.response_code is None  # nothing answered: nothing was contacted


def test_the_audit_keeps_the_host_only_and_shows_webhook_rows_to_release_managers(make_user):
    rita = _rita(make_user)
    secret_url = "http://127.0.0.1:9/services/T000/B000/very-secret-path?token=abc"
    assert _create(rita, secret_url).status_code == 201
    row = AuditEvent.objects.get(action="webhook.created")
    assert row.details["host"] == "127.0.0.1"
    assert "very-secret-path" not in str(row.details) + row.object_repr
    # A row kept from before (the whole URL in it) is hidden from other roles too.
    AuditEvent.objects.create(
        action="webhook.updated",
        object_type="notifications.webhook",
        object_id="1",
        object_repr="webhook 1 → https://hooks.slack.com/services/T/B/old-secret",
        details={"url": "https://hooks.slack.com/services/T/B/old-secret"},
    )
    ada, manager = Client(), Client()
    ada.force_login(make_user("ada", role="algorithm"))
    manager.force_login(make_user("rm", role="release-managers"))
    for path in ("/audit/", "/audit/export.csv", "/"):
        hidden = ada.get(path).content.decode()
        assert "old-secret" not in hidden and "very-secret-path" not in hidden, path
    assert "release managers only" in ada.get("/audit/").content.decode()
    assert "old-secret" in manager.get("/audit/export.csv").content.decode()
    assert "127.0.0.1" in manager.get("/audit/").content.decode()


def test_a_name_is_resolved_when_sent_and_the_post_goes_to_the_checked_address(make_user):
    """`localhost` is checked at send time (loopback is allowed here) and the POST reaches
    the receiver on 127.0.0.1, with the name kept in the Host header."""
    from audit.services import audit_record
    from notifications.outbox import outbox_scan
    from notifications.services import webhook_create
    from tests.notifications.receiver import Receiver

    rita = make_user("rita", role="release-managers")
    with Receiver() as receiver:
        url = receiver.url.replace("127.0.0.1", "localhost")
        webhook_create(actor=rita, url=url, secret=SECRET, events=["alert.fired"])
        audit_record(actor=None, action="alert.fired", details={"severity": "critical"})
        for delivery_id in outbox_scan():
            delivery_attempt(delivery_id=delivery_id)
        (received,) = receiver.wait_for(1)
    assert received.headers["host"].startswith("localhost:")
    assert Delivery.objects.get().status == Delivery.Status.DELIVERED
