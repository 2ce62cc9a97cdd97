"""Configuration read from environment variables (12-factor); every default is local-only."""

from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()

# The role scripts/setup_database.sh makes: owns the database, is not a superuser.
DEFAULT_DATABASE_URL = "postgres://switchyard@127.0.0.1:5432/switchyard"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
# Development only: the production settings refuse to start with it (or without a key).
DEV_SECRET_KEY = "insecure-dev-only-key-change-me"  # noqa: S105 - refused by prod


def var_dir() -> Path:
    """Where runtime state lives (Triton repositories, logs, nginx prefix, artifacts)."""
    return Path(env.str("SWITCHYARD_VAR_DIR", default=str(BASE_DIR / "var")))
