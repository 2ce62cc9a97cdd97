"""Reads of releases."""

from django.db.models import QuerySet

from releases.models import Release

_RELATED = ("cluster", "model", "baseline", "candidate", "created_by")


def release_list(*, cluster=None, model=None, limit: int = 100) -> QuerySet[Release]:
    qs = Release.objects.select_related(*_RELATED)
    if cluster is not None:
        qs = qs.filter(cluster=cluster)
    if model is not None:
        qs = qs.filter(model=model)
    return qs[:limit]


def release_get(*, release_id: int) -> Release | None:
    return (
        Release.objects.select_related(*_RELATED)
        .prefetch_related("events")
        .filter(pk=release_id)
        .first()
    )


def router_view(*, cluster) -> dict:
    """What the cluster's router does now, for the cluster page: driver, whether it runs,
    which nodes it sends to, and each route's split (from the running router itself)."""
    from deployments.validation import cluster_router
    from integrations.routers.settings import RouterSettingsError
    from releases.routing import router_for

    view = {"driver": "none", "listen": "", "running": False, "nodes": [], "routes": []}
    try:
        settings = cluster_router(cluster)
    except RouterSettingsError as exc:
        return view | {"error": f"{exc.field}: {exc.message}"}
    view["driver"] = settings.driver
    if view["driver"] != "nginx":
        return view
    view["listen"] = settings.listen
    live = router_for(cluster).current()
    routed = set(live.upstreams) if live is not None else set()
    view["running"] = live is not None
    view["nodes"] = [{"name": n.name, "routed": n.http_url in routed} for n in cluster.nodes.all()]
    for route in live.routes if live is not None else []:
        split = [{"version": v, "percent": w} for v, w in sorted(route.live_weights().items())]
        view["routes"].append({"model": route.model, "split": split})
    return view
