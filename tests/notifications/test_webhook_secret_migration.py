"""The migration that seals webhook signing secrets seals those stored in plain text before it."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from core.sealed import unseal

BEFORE = [("notifications", "0001_initial")]
AFTER = [("notifications", "0002_webhook_secret_sealed")]
SECRET = "an-old-plain-text-secret-0123"


@pytest.mark.django_db(transaction=True)
def test_secrets_stored_in_plain_text_are_sealed():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps.get_model("notifications", "Webhook")
    old.objects.create(url="http://127.0.0.1:9/hook", secret=SECRET, events=["alert.fired"])

    executor = MigrationExecutor(connection)
    executor.migrate(AFTER)
    new = executor.loader.project_state(AFTER).apps.get_model("notifications", "Webhook")
    (sealed,) = new.objects.values_list("secret_sealed", flat=True)
    assert SECRET not in sealed and unseal(sealed) == SECRET
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM notifications_webhook")
        assert not any(SECRET in str(value) for row in cursor.fetchall() for value in row)


@pytest.fixture(autouse=True)
def _back_to_the_latest_migrations():
    """Back to the latest migrations, so later tests find every column (a failure too)."""
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
