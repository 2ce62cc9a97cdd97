"""The migration that seals webhook signing secrets seals those stored in plain text before it."""

import pytest
from django.db import connection

from core.sealed import unseal
from tests.conftest import migrate_to

pytestmark = pytest.mark.usefixtures("latest_migrations_after")
BEFORE = [("notifications", "0001_initial")]
AFTER = [("notifications", "0002_webhook_secret_sealed")]
SECRET = "an-old-plain-text-secret-0123"


@pytest.mark.django_db(transaction=True)
def test_secrets_stored_in_plain_text_are_sealed():
    old = migrate_to(BEFORE).get_model("notifications", "Webhook")
    old.objects.create(url="http://127.0.0.1:9/hook", secret=SECRET, events=["alert.fired"])

    new = migrate_to(AFTER).get_model("notifications", "Webhook")
    (sealed,) = new.objects.values_list("secret_sealed", flat=True)
    assert SECRET not in sealed and unseal(sealed) == SECRET
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM notifications_webhook")
        assert not any(SECRET in str(value) for row in cursor.fetchall() for value in row)
