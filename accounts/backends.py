"""Sign-in that does not hold a pooled database connection while the password hash runs.

A password check is PBKDF2 with Django's iteration count: a fraction of a second of CPU. Django's
ModelBackend holds the request's database connection across it, so with a capped pool
(SWITCHYARD_DATABASE_POOL_SIZE) fifty people signing in at once held every connection while
they hashed and the rest timed out waiting for one. This backend reads the user, hands the
connection back to the pool (outside a transaction only), then hashes; the writes after a
successful check (last_login, the session) take a connection again.
"""

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.db import connection

from accounts.roles import groups_known, with_group_names


def connection_release() -> None:
    """Give this thread's connection back to the pool; a no-op without a pool (a persistent
    connection is kept) or inside a transaction."""
    pooled = "pool" in (connection.settings_dict.get("OPTIONS") or {})
    if pooled and not connection.in_atomic_block:
        connection.close()


class PoolFriendlyModelBackend(ModelBackend):
    """ModelBackend whose password check runs without a database connection held."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        users = get_user_model()
        if username is None:
            username = kwargs.get(users.USERNAME_FIELD)
        if username is None or password is None:
            return None
        try:
            user = users._default_manager.get_by_natural_key(username)
        except users.DoesNotExist:
            connection_release()
            users().set_password(password)  # as long as a real check: no user enumeration
            return None
        connection_release()
        if user.check_password(password) and self.user_can_authenticate(user):
            return user
        return None

    def get_user(self, user_id):
        """The session's user, loaded once per request with its group names in the same query
        (every page checks its roles)."""
        users = get_user_model()
        try:
            user = with_group_names(users._default_manager.all()).get(pk=user_id)
        except users.DoesNotExist:
            return None
        return groups_known(user) if self.user_can_authenticate(user) else None
