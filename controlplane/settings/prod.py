"""Production: secrets and hosts must come from the environment."""

from controlplane.env import env

from .base import *  # noqa: F403

SECRET_KEY = env.str("DJANGO_SECRET_KEY")
DEBUG = False
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
