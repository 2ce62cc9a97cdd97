"""Local development and `make demo`."""

from .base import *  # noqa: F403

DEBUG = True

# Static files come straight from the finders (WhiteNoise autorefresh); no collectstatic.
STATIC_ROOT = None
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
