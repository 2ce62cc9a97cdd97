"""Health passes: no arguments, one service call, safe to run twice (a pass per cluster
takes an advisory lock; alerts deduplicate per key)."""

import logging

from celery import shared_task

from health.watch import health_pass_all

log = logging.getLogger(__name__)


@shared_task(name="health.watch_all", soft_time_limit=120, time_limit=150, ignore_result=True)
def watch_all() -> int:
    """Probe and judge every cluster; returns how many alerts fired."""
    reports = health_pass_all()
    return sum(r.fired for r in reports)
