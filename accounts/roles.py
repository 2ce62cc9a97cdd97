"""The three roles of Switchyard; each is a Django group made by a data migration."""

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.contrib.postgres.aggregates import ArrayAgg
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q, QuerySet, Value


class Role(models.TextChoices):
    ALGORITHM = "algorithm", "Algorithm team"
    RELEASE_MANAGERS = "release-managers", "Release managers"
    MANAGERS = "managers", "Managers"


# The group names of a request's user are read at most once per request: a console page asks
# its user's roles five to ten times (menu, badges, buttons), each a query otherwise. The
# session's user brings them in the query that loads it (accounts/backends.py: every page
# checks them); a token's user reads them at its first role check (most API calls make none).
# Other user objects (a service's actor, a test's fixture) read them on every check.
_GROUPS = "_switchyard_groups"
_NAMES = "switchyard_group_names"
_UNREAD = object()


def groups_read_once(user: AbstractBaseUser) -> AbstractBaseUser:
    """Mark a user object that lives for one request: its group names are read on the first
    role check and kept."""
    setattr(user, _GROUPS, _UNREAD)
    return user


def with_group_names(users: QuerySet) -> QuerySet:
    """`users` with each one's group names read in the same query (`groups_known`)."""
    names = ArrayAgg(
        "groups__name",
        filter=Q(groups__isnull=False),
        default=Value([], output_field=ArrayField(models.CharField())),
    )
    return users.annotate(**{_NAMES: names})


def groups_known(user: AbstractBaseUser) -> AbstractBaseUser:
    """Mark a user object that lives for one request, loaded by `with_group_names`, with
    the group names it came with: its role checks make no query."""
    setattr(user, _GROUPS, frozenset(getattr(user, _NAMES)))
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
    kept = _kept_groups(user)
    names = kept if kept is not None else set(user.groups.values_list("name", flat=True))
    return [r.value for r in Role if r.value in names]
