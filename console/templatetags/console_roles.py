"""`{% load console_roles %}` then `{% if user|has_role:"release-managers" %}`."""

from django import template

from accounts.roles import user_has_role

register = template.Library()


@register.filter
def has_role(user, role: str) -> bool:
    """True for a signed-in member of the role (or a superuser)."""
    return user_has_role(user, role)
