"""`{% open_alerts cluster=... node=... model=... %}`: the open alerts about one object, as a
table, on the cluster, node and model pages (their views stay as they are)."""

from django import template

from accounts.roles import Role, user_has_role
from health.selectors import alerts_open_about

register = template.Library()


@register.inclusion_tag("console/alerts/_table.html", takes_context=True)
def open_alerts(context, cluster=None, node=None, model=None, limit=20):
    user = context["request"].user
    return {
        "alerts": list(alerts_open_about(cluster=cluster, node=node, model=model)[:limit]),
        "can_ack": user_has_role(user, Role.RELEASE_MANAGERS.value),
        "about": True,
        "csrf_token": context.get("csrf_token"),
        "next": context["request"].get_full_path(),
    }
