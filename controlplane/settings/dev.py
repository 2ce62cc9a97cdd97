"""Local development and `make demo`."""

from .base import *  # noqa: F403

DEBUG = True
# The demo tooling (make demo, demo_traffic, triton_local) is not a product app: only here.
INSTALLED_APPS = [*INSTALLED_APPS, "demo"]  # noqa: F405

# The demo's Triton nodes, router and webhook receivers run on this machine.
SWITCHYARD_ALLOWED_TARGET_NETWORKS = env.str(  # noqa: F405
    "SWITCHYARD_ALLOWED_TARGET_NETWORKS", default="127.0.0.0/8,::1/128"
)

# Static files come straight from the finders (WhiteNoise autorefresh); no collectstatic.
STATIC_ROOT = None
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
