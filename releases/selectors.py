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
