"""Traffic-split router drivers for gray releases (nginx first) behind one small interface."""

from integrations.routers.base import (
    ApplyResult,
    ModelRoute,
    RouterDriver,
    RouterError,
    RouterState,
    get_driver,
)

__all__ = [
    "ApplyResult",
    "ModelRoute",
    "RouterDriver",
    "RouterError",
    "RouterState",
    "get_driver",
]
