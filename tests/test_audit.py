"""AuditEvent is append-only, in Python and in the database."""

import pytest
from django.db import DatabaseError, connection, transaction

from audit.models import AuditEvent
from audit.services import audit_record

pytestmark = pytest.mark.django_db


def test_audit_record_keeps_actor_action_object_and_details(make_user):
    user = make_user("ada", role="algorithm")
    event = audit_record(actor=user, action="thing.done", obj=user, details={"why": "test"})
    event.refresh_from_db()
    assert (event.actor_id, event.actor_username, event.action) == (user.pk, "ada", "thing.done")
    assert (event.object_type, event.object_id) == ("auth.user", str(user.pk))
    assert event.details == {"why": "test"} and event.created_at is not None


def test_events_cannot_be_changed_or_deleted_through_the_orm():
    event = audit_record(actor=None, action="x")
    event.action = "y"
    with pytest.raises(ValueError, match="append-only"):
        event.save()
    with pytest.raises(ValueError, match="append-only"):
        event.delete()


def test_database_refuses_update_and_delete_of_audit_rows():
    event = audit_record(actor=None, action="x")
    table = AuditEvent._meta.db_table
    for sql in (
        f"UPDATE {table} SET action = 'y' WHERE id = %s",
        f"DELETE FROM {table} WHERE id = %s",
    ):
        with pytest.raises(DatabaseError, match="append-only"):
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(sql, [event.pk])
    assert AuditEvent.objects.get(pk=event.pk).action == "x"
