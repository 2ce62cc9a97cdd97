"""The leak watch's hook on the control plane's loads and unloads.

`@memory_watched("load")` on a function `(node, plan_or_model, ...)` reads the node's memory
just before and after it and sends `node_operation_done`; the health app listens and keeps
the samples (deployments cannot import it: one-way imports). With no listener connected,
nothing is read. A listener's failure never fails the load: the signal is sent robustly.
"""

import functools
import logging
from collections.abc import Callable

from django.conf import settings
from django.dispatch import Signal

from integrations.triton.memory import node_memory

log = logging.getLogger(__name__)

# kwargs: node (TritonNode), model (name), operation ("load" | "unload"), before and after
# (integrations.triton.memory.NodeMemory), ok (the operation succeeded).
node_operation_done = Signal()


def _reading(node):
    return node_memory(
        node.http_url, node.metrics_url or None, timeout_s=settings.SWITCHYARD_TRITON_TIMEOUT_S
    )


def memory_watched(operation: str) -> Callable:
    """Decorate a load or unload on one node (see the module docstring)."""

    def decorate(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def watched(node, target, *args, **kwargs):
            if not node_operation_done.has_listeners():
                return fn(node, target, *args, **kwargs)
            before = _reading(node)
            outcome = fn(node, target, *args, **kwargs)
            model = target if isinstance(target, str) else target.model
            for _, error in node_operation_done.send_robust(
                sender=None,
                node=node,
                model=model,
                operation=operation,
                before=before,
                after=_reading(node),
                ok=bool(getattr(outcome, "ok", True)),
            ):
                if isinstance(error, Exception):
                    log.warning("memory sample of %s %s not kept: %s", operation, model, error)
            return outcome

        return watched

    return decorate
