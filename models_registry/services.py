"""Writes to the registry; each records an audit event in the same transaction."""

from django.db import IntegrityError, transaction

from audit.services import audit_record
from models_registry.models import Team


class RegistryError(Exception):
    """A registry write refused for a reason the user can fix; `field` names the input."""

    def __init__(self, message: str, *, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field


def team_create(*, name: str, actor) -> Team:
    """Create a team with a unique name, or raise RegistryError; audited."""
    team = Team(name=name)
    team.full_clean(validate_unique=False)
    try:
        with transaction.atomic():
            team.save()
            audit_record(actor=actor, action="team.created", obj=team)
    except IntegrityError as exc:
        raise RegistryError(f"A team named '{name}' already exists.", field="name") from exc
    return team
