"""Production: secrets and hosts must come from the environment, or nothing starts.

Every entry point (manage.py and its commands, daphne's asgi, celery worker and beat) loads
these settings first, so a missing secret stops each of them with the message below.
HTTPS: HSTS, redirect to https (behind a proxy that says so in a header), secure cookies.
"""

import os

from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured
from whitenoise.compress import Compressor

from controlplane.env import DEV_SECRET_KEY, env

from .base import *  # noqa: F403

REQUIRED_ENVIRONMENT = ("DJANGO_SECRET_KEY", "DATABASE_URL", "REDIS_URL", "DJANGO_ALLOWED_HOSTS")
MIN_SECRET_KEY_LENGTH = 50


def _require_environment() -> None:
    """Raise ImproperlyConfigured naming every missing or unsafe variable."""
    problems = [
        f"{n} is not set" for n in REQUIRED_ENVIRONMENT if not os.environ.get(n, "").strip()
    ]
    key = os.environ.get("DJANGO_SECRET_KEY", "").strip()
    if key == DEV_SECRET_KEY:
        problems.append("DJANGO_SECRET_KEY is the development default")
    elif key and len(key) < MIN_SECRET_KEY_LENGTH:
        problems.append(f"DJANGO_SECRET_KEY is shorter than {MIN_SECRET_KEY_LENGTH} characters")
    problems += _secrets_key_problems(os.environ.get("SWITCHYARD_SECRETS_KEY", ""))
    if problems:
        raise ImproperlyConfigured(
            "Refusing to start with controlplane.settings.prod: "
            + "; ".join(problems)
            + ". Set them in the environment (docs/SECURITY.md, 'Sign-in and tokens')."
        )


def _secrets_key_problems(value: str) -> list[str]:
    """SWITCHYARD_SECRETS_KEY is optional (without it the key that encrypts stored node keys
    is derived from DJANGO_SECRET_KEY); when set, every key in it must be a Fernet key."""
    try:
        for key in (k.strip() for k in value.split(",") if k.strip()):
            Fernet(key)
    except (ValueError, TypeError):
        return ["SWITCHYARD_SECRETS_KEY is not a comma-separated list of Fernet keys"]
    return []


def _proxy_ssl_header(value: str) -> tuple[str, str] | None:
    """'HTTP_X_FORWARDED_PROTO=https' -> ('HTTP_X_FORWARDED_PROTO', 'https'); '' -> None."""
    if not value:
        return None
    name, sep, expected = value.partition("=")
    if not sep or not name.startswith("HTTP_") or not expected:
        raise ImproperlyConfigured(
            "DJANGO_SECURE_PROXY_SSL_HEADER must look like HTTP_X_FORWARDED_PROTO=https"
        )
    return name, expected


_require_environment()

SECRET_KEY = env.str("DJANGO_SECRET_KEY")
DEBUG = False
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS")
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_HSTS_SECONDS = env.int("DJANGO_SECURE_HSTS_SECONDS", default=31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False)
SECURE_HSTS_PRELOAD = env.bool("DJANGO_SECURE_HSTS_PRELOAD", default=False)
SECURE_SSL_REDIRECT = env.bool("DJANGO_SECURE_SSL_REDIRECT", default=True)
# Load balancers probe /healthz over plain HTTP inside the network.
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
# Only set this when the reverse proxy overwrites the header on every request.
SECURE_PROXY_SSL_HEADER = _proxy_ssl_header(env.str("DJANGO_SECURE_PROXY_SSL_HEADER", default=""))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
# Source maps (6 MB of Bootstrap's) are fetched only by a browser's developer tools: served
# as they are, not compressed twice more at collectstatic (39 -> 18 s of it on 2 cores).
WHITENOISE_SKIP_COMPRESS_EXTENSIONS = (*Compressor.SKIP_COMPRESS_EXTENSIONS, "map")
