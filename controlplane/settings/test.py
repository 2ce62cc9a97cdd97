"""pytest: real PostgreSQL and Redis, isolated from the demo by Redis db and prefixes."""

import tempfile

from controlplane.env import env

from .base import *  # noqa: F403

# Tests use their own Redis database so a running demo's worker never answers them.
REDIS_URL = env.str("TEST_REDIS_URL", default="redis://127.0.0.1:6379/9")
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [REDIS_URL], "prefix": "switchyard-test"},
    }
}
CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = REDIS_URL
CELERY_TASK_DEFAULT_QUEUE = env.str("CELERY_QUEUE", default="switchyard-test")
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
SWITCHYARD_VAR_DIR = BASE_DIR / "var" / "test"  # noqa: F405

# Static files come straight from the finders (WhiteNoise autorefresh); no collectstatic.
STATIC_ROOT = None
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
SWITCHYARD_STORAGE_ROOT = env.path(
    "SWITCHYARD_STORAGE_ROOT",
    default=str(BASE_DIR / "var" / "test" / "artifacts"),  # noqa: F405
)
# Fuzzers in the suite send any address: the server may only ever contact loopback.
SWITCHYARD_ALLOWED_TARGET_NETWORKS = "127.0.0.0/8,::1/128"
# Tests put repositories and router folders under pytest's temporary folders.
SWITCHYARD_REPOSITORY_ROOTS = [str(SWITCHYARD_VAR_DIR / "repositories"), tempfile.gettempdir()]
SWITCHYARD_ROUTER_ROOTS = [str(SWITCHYARD_VAR_DIR / "routers"), tempfile.gettempdir()]
