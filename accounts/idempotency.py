"""Safe retries: an `Idempotency-Key` header on a POST that creates work (API.md, Retries).

The first request with a key runs and its answer (status and JSON body) is stored; a retry
by the same user with the same key and the same request (method, path with query, body)
gets that answer replayed, with `Idempotent-Replayed: true`, and creates nothing. The same
key with a different request is a 409, and so is a retry while the first is still running.
Server errors (5xx) are not stored: the retry runs again.

While the first request runs, its database session holds an advisory lock on its key's row
(taken before the row is committed, so no retry ever sees the row unlocked). The work and
its stored answer are one transaction. A request that ended without storing its answer
because its session did (PostgreSQL restarted, the web process was killed) leaves a row
nobody holds and none of its work: the next retry takes it over and runs.
"""

import hashlib
import json
from collections.abc import Callable
from datetime import timedelta
from functools import wraps
from typing import Any

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.utils import timezone
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from accounts.errors import ApplicationError, error_response, errors_response
from accounts.models import IdempotencyKey

HEADER = "Idempotency-Key"
MAX_KEY_LENGTH = 255
# Advisory lock key space of running keyed requests (key: the IdempotencyKey row's id); the
# other namespaces are in deployments/locks.py, health/watch.py, notifications/outbox.py.
LOCK_NAMESPACE = 7330


def _canonical(value: Any) -> Any:
    if isinstance(value, UploadedFile):
        digest = hashlib.sha256()
        for chunk in value.chunks():
            digest.update(chunk)
        value.seek(0)
        return {"file": value.name, "sha256": digest.hexdigest()}
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    return value


def request_fingerprint(request) -> str:
    """sha256 of method, full path and body (files by their content's digest)."""
    data = request.data
    if hasattr(data, "lists"):  # a QueryDict (form or multipart): keep repeated fields
        data = {key: values for key, values in data.lists()}
    body = json.dumps(_canonical(data), sort_keys=True, default=str)
    raw = f"{request.method}\n{request.get_full_path()}\n{body}"
    return hashlib.sha256(raw.encode()).hexdigest()


def _lock(row_id: int, *, wait: bool) -> bool:
    """Take the session-level advisory lock of a running key (kept after commits)."""
    sql = "SELECT pg_advisory_lock(%s, %s)" if wait else "SELECT pg_try_advisory_lock(%s, %s)"
    with connection.cursor() as cursor:
        cursor.execute(sql, [LOCK_NAMESPACE, row_id])
        return wait or bool(cursor.fetchone()[0])


def _unlock(row_id: int) -> None:
    """Release it; a session that is gone released it already."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [LOCK_NAMESPACE, row_id])
    except DatabaseError:
        pass


def _abandoned(row: IdempotencyKey) -> bool:
    """True when no running request holds `row`: the request that claimed it ended without
    an answer (its database session ended first). Its row is deleted unless answered since."""
    if not _lock(row.pk, wait=False):
        return False
    try:
        IdempotencyKey.objects.filter(pk=row.pk, status__isnull=True).delete()
    finally:
        _unlock(row.pk)
    return True


def _claim(request, key: str) -> IdempotencyKey | Response:
    """The new row for this key (its lock held by this session), or the answer for a key
    already used."""
    fingerprint = request_fingerprint(request)
    try:
        with transaction.atomic():
            row = IdempotencyKey.objects.create(user=request.user, key=key, fingerprint=fingerprint)
            _lock(row.pk, wait=True)  # before the commit: a retry never sees it unlocked
            return row
    except IntegrityError:
        pass
    found = IdempotencyKey.objects.filter(user=request.user, key=key).first()
    if found is None:  # pruned between the two statements: run it as new
        return _claim(request, key)
    if found.fingerprint != fingerprint:
        message = f"{HEADER} '{key}' was already used for a different request."
        return errors_response(message, field=HEADER, status=409)
    if found.status is None:
        if _abandoned(found):  # claim it anew (or replay what its request stored meanwhile)
            return _claim(request, key)
        message = f"A request with {HEADER} '{key}' is still running; retry later."
        return errors_response(message, field=HEADER, status=409)
    return Response(found.body, status=found.status, headers={"Idempotent-Replayed": "true"})


def _store(row: IdempotencyKey, response) -> None:
    data = getattr(response, "data", None)
    if response.status_code >= 500 or (data is None and response.status_code != 204):
        row.delete()
        return
    row.status = response.status_code
    row.body = json.loads(JSONRenderer().render(data)) if data is not None else None
    row.save(update_fields=["status", "body"])


def idempotent(method: Callable) -> Callable:
    """Decorate an APIView handler `(self, request, ...)` that creates work."""

    @wraps(method)
    def handler(self, request, *args, **kwargs):
        key = request.headers.get(HEADER)
        if key is None or not request.user.is_authenticated:
            return method(self, request, *args, **kwargs)
        if not key.strip() or len(key) > MAX_KEY_LENGTH:
            message = f"{HEADER} must be 1 to {MAX_KEY_LENGTH} characters."
            return errors_response(message, field=HEADER)
        claimed = _claim(request, key)
        if isinstance(claimed, Response):
            return claimed
        try:
            try:
                # The work and its stored answer commit together: a request cut off after
                # its work (PostgreSQL gone, the process killed) leaves neither, and its
                # retry runs it, instead of finding the work done and the answer missing.
                with transaction.atomic():
                    response = method(self, request, *args, **kwargs)
                    _store(claimed, response)
            except ApplicationError as exc:  # a refusal is an answer: replayed like any other
                response = error_response(exc)
                _store(claimed, response)
            except BaseException:
                claimed.delete()
                raise
        finally:
            _unlock(claimed.pk)
        return response

    return handler


def keys_prune() -> int:
    """Delete keys older than SWITCHYARD_IDEMPOTENCY_KEY_HOURS; safe to run twice."""
    cutoff = timezone.now() - timedelta(hours=settings.SWITCHYARD_IDEMPOTENCY_KEY_HOURS)
    deleted, _ = IdempotencyKey.objects.filter(created_at__lt=cutoff).delete()
    return deleted
