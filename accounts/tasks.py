"""Periodic accounts jobs."""

from celery import shared_task

from accounts import services


@shared_task(name="accounts.tokens_prune", soft_time_limit=120, time_limit=150)
def tokens_prune() -> int:
    """Delete tokens expired or revoked long ago; safe to run twice."""
    return services.api_tokens_prune()


@shared_task(name="accounts.idempotency_keys_prune", soft_time_limit=120, time_limit=150)
def idempotency_keys_prune() -> int:
    """Delete Idempotency-Key answers older than SWITCHYARD_IDEMPOTENCY_KEY_HOURS."""
    from accounts import idempotency

    return idempotency.keys_prune()
