"""Registry tasks: one service call each, safe to run twice."""

from celery import shared_task

from models_registry.services import storage_sweep as sweep


@shared_task(name="models_registry.storage_sweep", soft_time_limit=1800, time_limit=1900)
def storage_sweep() -> dict:
    """Remove stored files no version references and abandoned uploads (daily)."""
    done = sweep()
    return {"blobs_removed": done.blobs_removed, "bytes_freed": done.bytes_freed}
