"""`{% open_alerts cluster=... node=... model=... %}`: the open alerts about one object, as a
table, on the cluster, node and model pages (their views stay as they are); with
`calls_of=<model>`, those of the models it calls (its graph: a failing step degrades it)."""

from django import template

from accounts.roles import Role, user_has_role
from health.selectors import alerts_open_about
from models_registry.selectors import models_called

register = template.Library()


@register.inclusion_tag("console/alerts/_table.html", takes_context=True)
def open_alerts(context, cluster=None, node=None, model=None, calls_of=None, limit=20):
    user = context["request"].user
    called = models_called(model=calls_of) if calls_of is not None else None
    if called == []:
        return {"alerts": [], "about": True}
    found = alerts_open_about(cluster=cluster, node=node, model=model, models=called)
    return {
        "alerts": list(found[:limit]),
        "through": called,
        "can_ack": user_has_role(user, Role.RELEASE_MANAGERS.value),
        "about": True,
        "csrf_token": context.get("csrf_token"),
        "next": context["request"].get_full_path(),
    }
