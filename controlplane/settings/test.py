"""pytest: real PostgreSQL and Redis, isolated from the demo by Redis db and prefixes."""

import os
import tempfile
import uuid

from controlplane.env import env

from .base import *  # noqa: F403
from .base import CACHE_OPTIONS, channel_layer_host


def _worker_apart(worker: str) -> None:
    """`make test` runs the suite in several pytest-xdist workers (PYTEST_XDIST_WORKER gw0,
    gw1, ...), each a test session of its own: pytest-django gives each its own database,
    and here each gets its own Redis db (the base db + its number) and Celery queue. Written
    back to the environment once, so the processes a worker starts inherit them as they are
    (a test that gives a child a queue of its own keeps it)."""
    if not worker or os.environ.get("SWITCHYARD_TEST_WORKER") == worker:
        return
    number = int(worker.removeprefix("gw"))
    url = os.environ.get("SWITCHYARD_TEST_REDIS_URL", "redis://127.0.0.1:6379/9")
    base, _, db = url.rpartition("/")
    os.environ["SWITCHYARD_TEST_REDIS_URL"] = f"{base}/{(int(db or 0) + number) % 16}"
    queue = os.environ.get("SWITCHYARD_CELERY_QUEUE", "switchyard-test")
    os.environ["SWITCHYARD_CELERY_QUEUE"] = f"{queue}-{worker}"
    os.environ["SWITCHYARD_TEST_WORKER"] = worker


_worker_apart(os.environ.get("PYTEST_XDIST_WORKER", ""))
# Each worker's own folder under var/test (artifacts, repositories, routers).
WORKER_DIR = os.environ.get("SWITCHYARD_TEST_WORKER", "")

# Tests use their own Redis database so a running demo's worker never answers them.
REDIS_URL = env.str("SWITCHYARD_TEST_REDIS_URL", default="redis://127.0.0.1:6379/9")
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {
            "hosts": [channel_layer_host(REDIS_URL)],
            "prefix": "switchyard-test",
            "serializer_format": "msgpack",
        },
    }
}
# A broker apart from Redis (a test points one process at a broker that is down).
CELERY_BROKER_URL = env.str("SWITCHYARD_TEST_BROKER_URL", default=REDIS_URL)
# One key prefix per test session, inherited by the processes it starts (daphne, workers), so
# sign-in counters and tickets of earlier runs never leak into this one.
os.environ.setdefault("SWITCHYARD_TEST_CACHE_PREFIX", f"switchyard-test-{uuid.uuid4().hex[:12]}")
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": os.environ["SWITCHYARD_TEST_CACHE_PREFIX"],
        "OPTIONS": CACHE_OPTIONS,
    }
}
CELERY_RESULT_BACKEND = REDIS_URL
CELERY_TASK_DEFAULT_QUEUE = env.str("SWITCHYARD_CELERY_QUEUE", default="switchyard-test")
# The whole suite signs in from 127.0.0.1 (the API fuzzer too): per-IP limits high enough that
# one test's failures never throttle the next; tests of throttling set their own limits.
SWITCHYARD_SIGNIN_MAX_FAILURES_PER_IP = 10_000
REST_FRAMEWORK = {  # noqa: F405
    **REST_FRAMEWORK,  # noqa: F405
    "DEFAULT_THROTTLE_RATES": {"auth": "10000/min", "ws-ticket": "10000/min"},
}
# Fast hashes for the tests' users; PBKDF2 verifies the real hashes a sign-in burst test stores.
PASSWORD_HASHERS = [
    "django.contrib.auth.hashers.MD5PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
]
SWITCHYARD_VAR_DIR = BASE_DIR / "var" / "test" / WORKER_DIR  # noqa: F405
# The demo tooling (make demo, demo_traffic, triton_local) is not a product app: only here.
INSTALLED_APPS = [*INSTALLED_APPS, "demo"]  # noqa: F405

# Static files come straight from the finders (WhiteNoise autorefresh); no collectstatic.
STATIC_ROOT = None
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
SWITCHYARD_STORAGE_ROOT = env.path(
    "SWITCHYARD_STORAGE_ROOT",
    default=str(SWITCHYARD_VAR_DIR / "artifacts"),
)
# Every /healthz call checks afresh; the cache's own test sets a window.
SWITCHYARD_HEALTH_CACHE_S = 0.0
# The managers' home computes its month afresh on every view (the same shared code path: the
# window is 0); the cache's own test sets a window.
SWITCHYARD_HOME_CACHE_S = 0.0
# Live pages and the release home read afresh too (tests write a point, then open the page);
# tests/console/test_shared_pages.py sets a window.
SWITCHYARD_PAGE_SHARE_S = 0.0
SWITCHYARD_ROUTER_REFUSED_CACHE_S = 0.0
# Fuzzers in the suite send any address: the server may only ever contact loopback.
SWITCHYARD_ALLOWED_TARGET_NETWORKS = "127.0.0.0/8,::1/128"
# The suite's Triton nodes restrict model control to one key made per test session
# (tests/conftest.py puts it in this variable): a cluster a test registers without a key of
# its own uses it, as a fleet with one key would.
SWITCHYARD_TRITON_DEFAULT_KEY_REF = "env:SWITCHYARD_NODE_KEY_TEST"
# Tests put repositories and router folders under pytest's temporary folders.
SWITCHYARD_REPOSITORY_ROOTS = [str(SWITCHYARD_VAR_DIR / "repositories"), tempfile.gettempdir()]
SWITCHYARD_ROUTER_ROOTS = [str(SWITCHYARD_VAR_DIR / "routers"), tempfile.gettempdir()]
