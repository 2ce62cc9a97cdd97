"""Release ticks: ids in, one service call, safe to run twice (the tick is level-triggered)."""

from celery import shared_task

from releases.models import Release
from releases.services import release_tick
from releases.state_machine import TERMINAL


@shared_task(name="releases.tick", soft_time_limit=120, time_limit=150, ignore_result=True)
def tick(release_id: int) -> None:
    """One tick of one release (skipped when another tick holds it)."""
    release_tick(release_id=release_id)


@shared_task(name="releases.tick_active", soft_time_limit=120, time_limit=150, ignore_result=True)
def tick_active() -> int:
    """One tick of every active release; returns how many were ticked."""
    ids = list(
        Release.objects.exclude(phase__in=[p.value for p in TERMINAL]).values_list("pk", flat=True)
    )
    for release_id in ids:
        release_tick(release_id=release_id)
    return len(ids)
