"""The production settings fail closed at every entry point when a secret is missing, and
turn on HTTPS protections (subprocesses import them; nothing is served)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
BIN = Path(sys.executable).parent
REQUIRED = ("DJANGO_SECRET_KEY", "DATABASE_URL", "REDIS_URL", "DJANGO_ALLOWED_HOSTS")
GOOD = {
    "DJANGO_SECRET_KEY": "k" * 30 + "-production-secret-for-tests-0123456789",
    "DATABASE_URL": "postgres://switchyard@127.0.0.1:5432/switchyard",
    "REDIS_URL": "redis://127.0.0.1:6379/12",
    "DJANGO_ALLOWED_HOSTS": "switchyard.example.org",
}
ENTRY_POINTS = {
    "manage.py": [sys.executable, "manage.py", "check"],
    "collector": [sys.executable, "manage.py", "run_collector", "--interval", "1"],
    "asgi (daphne)": [sys.executable, "-c", "import controlplane.asgi"],
    "celery worker": [str(BIN / "celery"), "-A", "controlplane", "worker", "-Q", "sy-none"],
    "celery beat": [str(BIN / "celery"), "-A", "controlplane", "beat", "-s", os.devnull],
}


def _run(command: list[str], **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in REQUIRED and "DJANGO" not in k}
    base.update(DJANGO_SETTINGS_MODULE="controlplane.settings.prod", **env)
    return subprocess.run(
        command, cwd=ROOT, env=base, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_every_entry_point_refuses_to_start_without_the_secret_key(entry):
    env = {k: v for k, v in GOOD.items() if k != "DJANGO_SECRET_KEY"}
    result = _run(ENTRY_POINTS[entry], **env)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "Refusing to start with controlplane.settings.prod" in output
    assert "DJANGO_SECRET_KEY is not set" in output


@pytest.mark.parametrize("missing", REQUIRED)
def test_each_required_variable_is_named_when_missing(missing):
    env = {k: v for k, v in GOOD.items() if k != missing}
    result = _run([sys.executable, "manage.py", "check"], **env)
    assert result.returncode != 0
    assert f"{missing} is not set" in result.stderr


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("insecure-dev-only-key-change-me", "is the development default"),
        ("short-key", "is shorter than 50 characters"),
    ],
)
def test_the_development_key_and_short_keys_are_refused(key, problem):
    result = _run([sys.executable, "manage.py", "check"], **{**GOOD, "DJANGO_SECRET_KEY": key})
    assert result.returncode != 0
    assert f"DJANGO_SECRET_KEY {problem}" in result.stderr


PRINT_SETTINGS = """
import json, django
from django.conf import settings
django.setup()
names = ["SECURE_HSTS_SECONDS", "SECURE_HSTS_INCLUDE_SUBDOMAINS", "SECURE_SSL_REDIRECT",
         "SECURE_PROXY_SSL_HEADER", "CSRF_TRUSTED_ORIGINS", "SESSION_COOKIE_SECURE",
         "CSRF_COOKIE_SECURE", "ALLOWED_HOSTS", "DEBUG", "SECURE_REDIRECT_EXEMPT"]
print(json.dumps({n: getattr(settings, n) for n in names}))
"""


def test_https_protections_come_from_the_environment():
    result = _run(
        [sys.executable, "-c", PRINT_SETTINGS],
        **GOOD,
        DJANGO_SECURE_HSTS_SECONDS="600",
        DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS="true",
        DJANGO_SECURE_PROXY_SSL_HEADER="HTTP_X_FORWARDED_PROTO=https",
        DJANGO_CSRF_TRUSTED_ORIGINS="https://switchyard.example.org",
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "SECURE_HSTS_SECONDS": 600,
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": True,
        "SECURE_SSL_REDIRECT": True,
        "SECURE_PROXY_SSL_HEADER": ["HTTP_X_FORWARDED_PROTO", "https"],
        "CSRF_TRUSTED_ORIGINS": ["https://switchyard.example.org"],
        "SESSION_COOKIE_SECURE": True,
        "CSRF_COOKIE_SECURE": True,
        "ALLOWED_HOSTS": ["switchyard.example.org"],
        "DEBUG": False,
        "SECURE_REDIRECT_EXEMPT": ["^healthz$"],
    }


def test_defaults_turn_hsts_on_and_a_malformed_proxy_header_is_refused():
    result = _run([sys.executable, "-c", PRINT_SETTINGS], **GOOD)
    assert result.returncode == 0, result.stderr
    values = json.loads(result.stdout)
    assert values["SECURE_HSTS_SECONDS"] == 31536000 and values["SECURE_PROXY_SSL_HEADER"] is None
    bad = _run(
        [sys.executable, "-c", PRINT_SETTINGS], **GOOD, DJANGO_SECURE_PROXY_SSL_HEADER="https"
    )
    assert bad.returncode != 0
    assert "DJANGO_SECURE_PROXY_SSL_HEADER must look like" in bad.stderr
