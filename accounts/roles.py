"""The three roles of Switchyard; each is a Django group made by a data migration."""

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import models


class Role(models.TextChoices):
    ALGORITHM = "algorithm", "Algorithm team"
    RELEASE_MANAGERS = "release-managers", "Release managers"
    MANAGERS = "managers", "Managers"


# The group names of a request's user, read at most once per request: a console page asks
# its user's roles five to ten times (menu, badges, buttons), each a query otherwise.
_GROUPS = "_switchyard_groups"
_UNREAD = object()


def groups_read_once(user: AbstractBaseUser) -> AbstractBaseUser:
    """Mark a user object that lives for one request (the session's or the token's, as the
    authentication loads it): its group names are read on the first role check and kept.
    Other user objects (a service's actor, a test's fixture) read them on every check."""
    setattr(user, _GROUPS, _UNREAD)
    return user


def _kept_groups(user) -> frozenset[str] | None:
    names = getattr(user, _GROUPS, None)
    if names is _UNREAD:
        names = frozenset(user.groups.values_list("name", flat=True))
        setattr(user, _GROUPS, names)
    return names


def user_has_role(user: AbstractBaseUser | AnonymousUser, *roles: str) -> bool:
    """True for a signed-in superuser or a member of any of the given groups."""
    if not user or not user.is_authenticated or not user.is_active:
        return False
    if user.is_superuser:
        return True
    kept = _kept_groups(user)
    if kept is not None:
        return not kept.isdisjoint(roles)
    return user.groups.filter(name__in=roles).exists()


def user_roles(user: AbstractBaseUser | AnonymousUser) -> list[str]:
    """The role names a user holds, in the order of Role."""
    if not user or not user.is_authenticated:
        return []
    if user.is_superuser:
        return [r.value for r in Role]
    names = _kept_groups(user) or set(user.groups.values_list("name", flat=True))
    return [r.value for r in Role if r.value in names]
