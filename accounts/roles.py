"""The three roles of Switchyard; each is a Django group made by a data migration."""

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import models


class Role(models.TextChoices):
    ALGORITHM = "algorithm", "Algorithm team"
    RELEASE_MANAGERS = "release-managers", "Release managers"
    MANAGERS = "managers", "Managers"


def user_has_role(user: AbstractBaseUser | AnonymousUser, *roles: str) -> bool:
    """True for a signed-in superuser or a member of any of the given groups."""
    if not user or not user.is_authenticated or not user.is_active:
        return False
    if user.is_superuser:
        return True
    return user.groups.filter(name__in=roles).exists()


def user_roles(user: AbstractBaseUser | AnonymousUser) -> list[str]:
    """The role names a user holds, in the order of Role."""
    if not user or not user.is_authenticated:
        return []
    if user.is_superuser:
        return [r.value for r in Role]
    names = set(user.groups.values_list("name", flat=True))
    return [r.value for r in Role if r.value in names]
