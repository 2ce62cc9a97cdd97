"""The 409 a registry delete answers when rows still point at what was to be deleted."""

from django.db.models import ProtectedError

from models_registry.services import _in_use


def test_names_at_most_five_users_sorted_on_the_given_field():
    exc = ProtectedError("protected", {f"release {n}" for n in range(7)})
    error = _in_use("'risk_score'", exc, field="name")
    assert error.status == 409
    assert error.field == "name"
    assert error.message == (
        "'risk_score' cannot be deleted: release 0; release 1; release 2; release 3; release 4."
    )
