"""The driver for clusters without a router: blue/green only, no weighted split.

Without a router, Triton answers unversioned requests with the highest READY version
(docs/TRITON.md §versions), so the only "route" such a cluster can honour is one version taking
everything, and it is the serving set (what is loaded), not this driver, that makes it so.
"""

from __future__ import annotations

from integrations.routers.base import ApplyResult, RouterError, RouterState


class NoRouter:
    """Accepts only 100%-to-one-version routes and remembers the last state applied."""

    name = "none"

    def __init__(self) -> None:
        self._state: RouterState | None = None

    def apply(self, state: RouterState) -> ApplyResult:
        """Record the state, or raise RouterError for any route that splits traffic."""
        split = [route.model for route in state.routes if route.pinned_version() is None]
        if split:
            raise RouterError(
                "A weighted split needs a router; this cluster has none "
                f"(models with a split: {', '.join(split)}).",
                "Give every route a single version at 100% (blue/green), or configure a router.",
            )
        changed = state != self._state
        self._state = state
        return ApplyResult(changed=changed)

    def current(self) -> RouterState | None:
        """The state last applied in this process, or None."""
        return self._state

    def stop(self) -> None:
        """Nothing to stop: this driver owns no process."""

    def rotate_logs(self, max_bytes: int) -> list[str]:
        """No logs to rotate: this driver writes none."""
        return []
