"""Long-poll: `?wait=<seconds>` on the detail of an async resource (API.md, Waiting).

The detail view answers at once when the resource is finished or no wait is asked for.
Otherwise the request parks on the channel layer: an async view awaits a group message that
a save of the resource sends (`notify_changed`, after the commit), re-reads, and answers as
soon as the resource is finished or the wait is up. A cheap re-check every `RECHECK_S`
covers a lost message. Under ASGI (daphne) a waiting client holds no thread: the view's
sync parts (authentication, permissions, the read) borrow the loop's shared pool and give
the thread back before the wait. A request without `wait` goes to a plain sync view
(`long_poll`): no event loop of its own, no hop between threads.
"""

import asyncio
import contextlib
import logging
import weakref
from collections.abc import Callable, Iterable

from asgiref.sync import SyncToAsync, async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from django.core.handlers.asgi import ASGIRequest
from django.db import connections, transaction
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import OpenApiParameter

log = logging.getLogger(__name__)

WAIT_MAX_S = 60
RECHECK_S = 5.0

WAIT_PARAMETER = OpenApiParameter(
    "wait",
    float,
    description=f"Long-poll: answer as soon as the resource is finished, or after this many "
    f"seconds (0 to {WAIT_MAX_S}; more is read as {WAIT_MAX_S}).",
)


def group_name(kind: str, pk) -> str:
    return f"changed.{kind}.{pk}"


def _send(groups: list[str]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        for group in groups:
            async_to_sync(layer.group_send)(group, {"type": "resource.changed", "group": group})
    except Exception:  # a lost message costs a waiter one re-check, never the write
        log.warning("could not announce a change to %s", groups, exc_info=True)


def notify_changed(kind: str, pk, *, now: bool = False) -> None:
    """Wake the waiters of (kind, pk) once the current transaction commits (`now`: at once,
    for callers already past their commit)."""
    groups = [group_name(kind, pk)]
    if now:
        _send(groups)
    else:
        transaction.on_commit(lambda: _send(groups))


def saved_receiver(kind: str) -> Callable:
    """A post_save receiver that announces every save of a `kind` row to its waiters."""

    def receiver(sender, instance, **kwargs) -> None:
        notify_changed(kind, instance.pk)

    return receiver


def parse_wait(raw: str | None) -> float | None:
    """Seconds to wait (capped at WAIT_MAX_S), None for no wait; ValueError when malformed."""
    if raw in (None, ""):
        return None
    seconds = float(raw)
    if not 0 <= seconds < float("inf"):
        raise ValueError(raw)
    return min(seconds, WAIT_MAX_S)


class _Listener:
    """One channel per process (and event loop) whose single receive loop, never cancelled,
    wakes the local waiters of the group a message names. Waiters come and go without
    touching the layer's receive (a receive cancelled mid-read can hang the layer)."""

    def __init__(self, layer):
        self.layer, self.channel, self.task = layer, None, None
        self.waiters: dict[str, set[asyncio.Event]] = {}
        self.starting = asyncio.Lock()

    async def _start(self) -> None:
        async with self.starting:
            if self.channel is None:
                self.channel = await self.layer.new_channel()
                self.task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        while True:
            try:
                message = await self.layer.receive(self.channel)
            except Exception:
                log.warning("the wait listener's receive failed; retrying", exc_info=True)
                await asyncio.sleep(1)
                continue
            for event in list(self.waiters.get(message.get("group"), ())):
                event.set()

    async def watch(self, groups: list[str], event: asyncio.Event) -> None:
        await self._start()
        for group in groups:
            self.waiters.setdefault(group, set()).add(event)
            await self.layer.group_add(group, self.channel)  # refreshes its expiry too

    async def unwatch(self, groups: list[str], event: asyncio.Event) -> None:
        for group in groups:
            left = self.waiters.get(group, set())
            left.discard(event)
            if not left:
                self.waiters.pop(group, None)
                await self.layer.group_discard(group, self.channel)


_listeners: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Listener]" = (
    weakref.WeakKeyDictionary()
)


def _listener() -> _Listener:
    loop = asyncio.get_running_loop()
    if loop not in _listeners:
        _listeners[loop] = _Listener(get_channel_layer())
    return _listeners[loop]


async def wait_for_change(
    groups: Iterable[str], seconds: float, finished: Callable[[], bool], *, sync
) -> None:
    """Return when `finished()` holds (checked on each group message and every RECHECK_S)
    or after `seconds`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    groups, changed, listener = list(groups), asyncio.Event(), _listener()
    await listener.watch(groups, changed)
    try:
        while not await sync(finished)() and (left := deadline - loop.time()) > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), timeout=min(left, RECHECK_S))
            changed.clear()
    finally:
        await listener.unwatch(groups, changed)


def _pooled(fn):
    """`fn` on the event loop's shared pool, its database connection closed after."""

    def run(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        finally:
            connections.close_all()

    return sync_to_async(run, thread_sensitive=False)


def _here(fn):
    """`fn` on the request's own thread (WSGI, the test client: the calling thread)."""
    return sync_to_async(fn, thread_sensitive=True)


async def _release_request_thread() -> None:
    """Under ASGI Django gives each request a thread of its own for its sync parts, kept
    until the request ends; close its database connections and let it go before a wait
    (the answer after the wait gets a fresh one, as asgiref does at the request's end)."""
    context = SyncToAsync.thread_sensitive_context.get(None)
    if context is None or context not in SyncToAsync.context_to_thread_executor:
        return
    await _here(connections.close_all)()
    executor = SyncToAsync.context_to_thread_executor.pop(context, None)
    if executor is not None:
        executor.shutdown(wait=False)


def long_poll(view_class, *, groups: Callable[..., list[str]], finished: Callable[..., bool]):
    """The view of `view_class` (a DRF APIView with a GET detail answering `finished`) that
    honours ?wait=. `groups(**kwargs)` names the channel groups announcing a change,
    `finished(**kwargs)` re-reads whether it is finished.

    Two twins: the sync view returned answers every request without `wait` as any DRF view
    does, on the thread it runs on; the async one (`.waiting` of it) waits. The web sends
    the requests with `wait` to Django's ASGI handler, which resolves them in
    controlplane/urls_waiting.py, where each long-poll view is its async twin (a waiting
    client holds no thread). Where the sync twin gets a `wait` (a WSGI server, the test
    client) it runs the async one on its own thread, which waits with it."""
    inner = view_class.as_view()

    async def waiting(request, **kwargs):
        if request.method != "GET":
            return await _here(inner)(request, **kwargs)
        try:
            seconds = parse_wait(request.GET.get("wait"))
        except ValueError:
            message = f"Use a number of seconds from 0 to {WAIT_MAX_S}."
            return JsonResponse({"errors": [{"field": "wait", "message": message}]}, status=400)
        response = await _here(inner)(request, **kwargs)
        data = getattr(response, "data", None)
        if not seconds or response.status_code != 200 or not isinstance(data, dict):
            return response
        if data.get("finished", True):
            return response
        sync = _here
        if isinstance(request, ASGIRequest):  # WSGI holds its thread whatever we do
            await _release_request_thread()
            sync = _pooled
        names = await sync(groups)(**kwargs)
        await wait_for_change(names, seconds, lambda: finished(**kwargs), sync=sync)
        return await _here(inner)(request, **kwargs)

    def view(request, **kwargs):
        if request.method == "GET" and "wait" in request.GET:
            return async_to_sync(waiting)(request, **kwargs)
        return inner(request, **kwargs)

    view.cls = view_class  # what drf-spectacular reads to document the operation
    view.initkwargs = {}
    view.waiting = csrf_exempt(waiting)
    return csrf_exempt(view)
