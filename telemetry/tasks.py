"""Periodic telemetry jobs."""

from celery import shared_task

from telemetry import services


@shared_task(name="telemetry.rollups_cleanup", soft_time_limit=300, time_limit=360)
def rollups_cleanup() -> int:
    """Apply the rollup retention; safe to run twice (deleting old rows again deletes none)."""
    return services.rollups_cleanup()
