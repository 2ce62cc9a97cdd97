"""The webhooks API: release managers only, the secret write-only, URLs under the target
allow-list, every write audited without the secret."""

import pytest
from cryptography.fernet import Fernet
from django.db import connection
from rest_framework.test import APIClient

from audit.models import AuditEvent
from core.sealed import SecretError, unseal
from notifications.models import Delivery, Webhook

pytestmark = pytest.mark.django_db
SECRET = "a-long-shared-secret-0123456789"


def _api(user) -> APIClient:
    api = APIClient()
    api.force_authenticate(user)
    return api


def _create(api, **fields):
    body = {
        "url": "http://127.0.0.1:9/hook",
        "secret": SECRET,
        "events": ["alert.fired", "release.promoted"],
        **fields,
    }
    return api.post("/api/v1/webhooks/", body, format="json")


def test_only_release_managers_manage_or_read_webhooks(make_user):
    rita = _api(make_user("rita", role="release-managers"))
    made = _create(rita)
    assert made.status_code == 201, made.content
    hook_id = made.json()["id"]
    for role in ("algorithm", "managers"):
        other = _api(make_user(f"u-{role}", role=role))
        assert _create(other).status_code == 403
        assert other.get("/api/v1/webhooks/").status_code == 403
        assert other.get(f"/api/v1/webhooks/{hook_id}/").status_code == 403
        assert other.get(f"/api/v1/webhooks/{hook_id}/deliveries/").status_code == 403
        patch = other.patch(f"/api/v1/webhooks/{hook_id}/", {"is_active": False}, format="json")
        assert patch.status_code == 403
        assert other.delete(f"/api/v1/webhooks/{hook_id}/").status_code == 403
    assert APIClient().get("/api/v1/webhooks/").status_code in (401, 403)
    assert Webhook.objects.get(pk=hook_id).is_active
    root = _api(make_user("root", superuser=True))
    assert root.get("/api/v1/webhooks/").status_code == 200


def test_the_secret_is_write_only_and_never_audited(make_user):
    rita = _api(make_user("rita", role="release-managers"))
    made = _create(rita, min_severity="warning", format="slack", description="on-call")
    body = made.json()
    assert "secret" not in body and SECRET not in made.content.decode()
    assert body["min_severity"] == "warning" and body["format"] == "slack"
    assert body["events"] == ["alert.fired", "release.promoted"]
    listed = rita.get("/api/v1/webhooks/")
    assert listed.status_code == 200 and SECRET not in listed.content.decode()
    assert listed["X-Total-Count"] == "1"
    url = f"/api/v1/webhooks/{body['id']}/"
    rotated = rita.patch(url, {"secret": "another-secret-0123456789"}, format="json")
    assert rotated.status_code == 200 and "secret" not in rotated.json()
    assert unseal(Webhook.objects.get(pk=body["id"]).secret_sealed) == "another-secret-0123456789"
    actions = list(AuditEvent.objects.order_by("id").values_list("action", "details"))
    assert [a for a, _ in actions] == ["webhook.created", "webhook.updated"]
    assert all(SECRET not in str(d) and "another-secret" not in str(d) for _, d in actions)
    assert rita.delete(url).status_code == 204
    assert rita.get(url).status_code == 404
    assert AuditEvent.objects.filter(action="webhook.deleted").count() == 1


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"url": "http://10.1.2.3:8080/hook"}, "url"),  # outside the allowed networks
        ({"url": "http://example.com/hook"}, "url"),  # a name under an allow-list
        ({"url": "ftp://127.0.0.1/hook"}, "url"),
        ({"url": "http://user:pw@127.0.0.1:9/hook"}, "url"),
        ({"secret": "short"}, "secret"),
        ({"events": []}, "events"),
        ({"events": ["alert.fired", "everything"]}, "events"),
        ({"min_severity": "panic"}, "min_severity"),
        ({"format": "xml"}, "format"),
        ({"extra": 1}, "extra"),
    ],
)
def test_a_bad_field_is_refused_with_400_naming_it(make_user, fields, field):
    rita = _api(make_user("rita", role="release-managers"))
    answer = _create(rita, **fields)
    assert answer.status_code == 400, answer.content
    assert field in {e.get("field", "").split(".")[0] for e in answer.json()["errors"]}
    assert not Webhook.objects.exists()


def test_a_patch_is_checked_like_a_create(make_user):
    rita = _api(make_user("rita", role="release-managers"))
    hook_id = _create(rita).json()["id"]
    url = f"/api/v1/webhooks/{hook_id}/"
    bad = rita.patch(url, {"url": "http://192.168.1.1:80/x"}, format="json")
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "url"
    good = rita.patch(url, {"events": ["deployment.failed"], "is_active": False}, format="json")
    assert good.status_code == 200
    assert good.json()["events"] == ["deployment.failed"] and good.json()["is_active"] is False


def test_the_delivery_log_lists_newest_first_and_filters_by_status(make_user):
    from django.utils import timezone

    rita = _api(make_user("rita", role="release-managers"))
    hook = Webhook.objects.get(pk=_create(rita).json()["id"])
    for n, status in enumerate(["delivered", "failed", "pending"]):
        Delivery.objects.create(
            webhook=hook,
            event="alert.fired",
            severity="critical",
            source="audit",
            source_id=n + 1,
            payload={"event": "alert.fired"},
            status=status,
            attempts=1,
            next_attempt_at=timezone.now(),
        )
    log = rita.get(f"/api/v1/webhooks/{hook.pk}/deliveries/")
    assert log.status_code == 200 and [d["status"] for d in log.json()] == [
        "pending",
        "failed",
        "delivered",
    ]
    failed = rita.get(f"/api/v1/webhooks/{hook.pk}/deliveries/?status=failed")
    assert [d["status"] for d in failed.json()] == ["failed"]
    bad = rita.get(f"/api/v1/webhooks/{hook.pk}/deliveries/?status=lost")
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "status"
    assert rita.get("/api/v1/webhooks/999999/deliveries/").status_code == 404


def test_the_secret_is_stored_sealed_and_a_new_one_replaces_it(make_user, settings):
    rita = _api(make_user("rita", role="release-managers"))
    hook_id = _create(rita).json()["id"]
    with connection.cursor() as cursor:  # every column of the row, as the database holds it
        cursor.execute("SELECT * FROM notifications_webhook WHERE id = %s", [hook_id])
        row = [str(value) for value in cursor.fetchone()]
    assert not any(SECRET in value for value in row)
    hook = Webhook.objects.get(pk=hook_id)
    assert unseal(hook.secret_sealed) == SECRET
    new = "another-long-shared-secret-987654"
    patched = rita.patch(f"/api/v1/webhooks/{hook_id}/", {"secret": new}, format="json")
    assert patched.status_code == 200, patched.content
    hook.refresh_from_db()
    assert unseal(hook.secret_sealed) == new and new not in hook.secret_sealed
    # Under other keys the stored value cannot be read: it is not the secret in disguise.
    settings.SWITCHYARD_SECRETS_KEY = Fernet.generate_key().decode()
    with pytest.raises(SecretError):
        unseal(hook.secret_sealed)
