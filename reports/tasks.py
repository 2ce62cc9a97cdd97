"""Periodic report jobs."""

from celery import shared_task

from reports import services


@shared_task(name="reports.cost_rollup", soft_time_limit=600, time_limit=660)
def cost_rollup() -> int:
    """Roll up every complete hour since the last run; safe to run twice (rebuilds replace)."""
    return services.cost_rollup_catch_up()
