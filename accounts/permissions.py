"""DRF permissions per role: everyone signed in reads; each role writes its own resources."""

from rest_framework.permissions import SAFE_METHODS, BasePermission

from accounts.roles import Role, user_has_role


class _RoleWrites(BasePermission):
    """Reads for any signed-in user; writes only for the roles in `write_roles`."""

    write_roles: tuple[str, ...] = ()
    message = "This action needs one of the roles: {roles}."

    def has_permission(self, request, view) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        if request.method in SAFE_METHODS:
            return True
        if user_has_role(request.user, *self.write_roles):
            return True
        self.message = self.message.format(roles=", ".join(self.write_roles))
        return False


class AlgorithmWrites(_RoleWrites):
    """Models, versions, benchmarks: the algorithm team writes."""

    write_roles = (Role.ALGORITHM.value,)


class ReleaseManagersWrite(_RoleWrites):
    """Clusters, deployments, releases, unloads: release managers write."""

    write_roles = (Role.RELEASE_MANAGERS.value,)
