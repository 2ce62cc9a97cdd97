"""Reads of the registry."""

from django.db.models import QuerySet

from models_registry.models import Team


def team_list() -> QuerySet[Team]:
    """All teams by name."""
    return Team.objects.all()
