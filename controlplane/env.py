"""Configuration read from environment variables (12-factor); every default is local-only.

Switchyard's own variables are named `SWITCHYARD_*`. Names set by convention keep theirs:
`DATABASE_URL`, `REDIS_URL`, `CELERY_BROKER_URL`, `CELERY_RESULT_BACKEND`, `DJANGO_*`.
A variable renamed to the prefix is still read under its old name when only that one is set,
with a DeprecationWarning and a logged warning naming the new name (`RENAMED`).
"""

import logging
import warnings
from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent

logger = logging.getLogger(__name__)

# New name: the old name it replaces (still read, with a warning, until it is removed).
RENAMED = {
    "SWITCHYARD_DATABASE_CONN_MAX_AGE": "DATABASE_CONN_MAX_AGE",
    "SWITCHYARD_CACHE_KEY_PREFIX": "CACHE_KEY_PREFIX",
    "SWITCHYARD_CHANNEL_LAYER_PREFIX": "CHANNEL_LAYER_PREFIX",
    "SWITCHYARD_CELERY_QUEUE": "CELERY_QUEUE",
    "SWITCHYARD_HEALTH_WORKER_PING_TIMEOUT_S": "HEALTH_WORKER_PING_TIMEOUT_S",
    "SWITCHYARD_LOG_LEVEL": "LOG_LEVEL",
    "SWITCHYARD_TELEMETRY_INTERVAL_S": "TELEMETRY_INTERVAL_S",
    "SWITCHYARD_TELEMETRY_SCRAPE_TIMEOUT_S": "TELEMETRY_SCRAPE_TIMEOUT_S",
    "SWITCHYARD_TELEMETRY_ROLLUP_RETENTION_DAYS": "TELEMETRY_ROLLUP_RETENTION_DAYS",
    "SWITCHYARD_TELEMETRY_TARGETS_REFRESH_S": "TELEMETRY_TARGETS_REFRESH_S",
    "SWITCHYARD_BENCHMARK_MAX_CONCURRENCY": "BENCHMARK_MAX_CONCURRENCY",
    "SWITCHYARD_BENCHMARK_MAX_LEVEL_S": "BENCHMARK_MAX_LEVEL_S",
    "SWITCHYARD_BENCHMARK_MAX_TOTAL_S": "BENCHMARK_MAX_TOTAL_S",
    "SWITCHYARD_BENCHMARK_BASELINE_TOLERANCE": "BENCHMARK_BASELINE_TOLERANCE",
    "SWITCHYARD_TEST_REDIS_URL": "TEST_REDIS_URL",
}


def name_to_read(name: str, environment) -> str:
    """`name`, or the old name it replaces when only the old one is set (with a warning)."""
    old = RENAMED.get(name)
    if old is None or name in environment or old not in environment:
        return name
    message = f"The environment variable {old} is deprecated: set {name} instead."
    warnings.warn(message, DeprecationWarning, stacklevel=4)
    logger.warning(message)
    return old


class SwitchyardEnv(environ.Env):
    """django-environ's reader that also reads renamed variables under their old names."""

    def get_value(self, var, cast=None, default=environ.Env.NOTSET, parse_default=False):
        return super().get_value(name_to_read(var, self.ENVIRON), cast, default, parse_default)


env = SwitchyardEnv()

# The role scripts/setup_database.sh makes: owns the database, is not a superuser.
DEFAULT_DATABASE_URL = "postgres://switchyard@127.0.0.1:5432/switchyard"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
# Development only: the production settings refuse to start with it (or without a key).
DEV_SECRET_KEY = "insecure-dev-only-key-change-me"  # noqa: S105 - refused by prod


def var_dir() -> Path:
    """Where runtime state lives (Triton repositories, logs, nginx prefix, artifacts)."""
    return Path(env.str("SWITCHYARD_VAR_DIR", default=str(BASE_DIR / "var")))


# How long the pool keeps retrying one failed connection attempt before it gives up; the next
# request that needs a connection then starts a fresh attempt at once. psycopg_pool's own
# default (5 minutes, with a backoff doubling from 1 s) kept a web process answering 503 for
# many seconds after PostgreSQL was back from a restart.
POOL_RECONNECT_S = 2.0


def database_pool(database: dict, *, size: int, timeout_s: float) -> None:
    """Give Django's `database` settings a psycopg connection pool of at most `size`
    connections per process (none when size is 0); pooled connections are not persistent
    ones, so CONN_MAX_AGE goes to 0.

    Connections are checked before use either way (CONN_HEALTH_CHECKS: the pool checks each
    one it hands out, Django each persistent one it reuses), so the connections PostgreSQL
    dropped when it restarted are replaced instead of failing the first requests after it."""
    database["CONN_HEALTH_CHECKS"] = True
    if size <= 0:
        return
    database["CONN_MAX_AGE"] = 0
    database.setdefault("OPTIONS", {})["pool"] = {
        "min_size": 1,
        "max_size": size,
        "timeout": timeout_s,
        "reconnect_timeout": min(POOL_RECONNECT_S, timeout_s),
    }
