"""Plan ticks on the releases lane: ids in, one service call, safe to run twice."""

import logging

from celery import shared_task
from django.conf import settings

from plans.models import ReleasePlan
from plans.state_machine import TERMINAL
from plans.tick import plan_tick

log = logging.getLogger(__name__)


@shared_task(name="plans.tick", soft_time_limit=120, time_limit=150, ignore_result=True)
def tick(plan_id: int) -> None:
    """One tick of one plan (skipped when another tick holds it); a failure is logged and
    the next pass ticks it again."""
    try:
        plan_tick(plan_id=plan_id)
    except Exception:  # one plan's failure never stops the lane; beat ticks it again
        log.exception("tick of plan %s failed", plan_id)


@shared_task(name="plans.tick_active", soft_time_limit=10, time_limit=20, ignore_result=True)
def tick_active() -> int:
    """Queue one tick per plan that has not ended (releases lane); how many."""
    ids = list(
        ReleasePlan.objects.exclude(phase__in=[p.value for p in TERMINAL]).values_list(
            "pk", flat=True
        )
    )
    for plan_id in ids:
        tick.apply_async(args=[plan_id], expires=settings.SWITCHYARD_TICK_EXPIRES_S)
    return len(ids)
