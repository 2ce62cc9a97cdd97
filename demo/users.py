"""The demo's users: one per role with fresh, printed passwords (DEMO ONLY), and the banner."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction

from audit.services import audit_record

DEMO_USERS = (
    ("ada", "algorithm", "algorithm team"),
    ("rita", "release-managers", "release manager"),
    ("max", "managers", "manager"),
    ("admin", None, "superuser"),
)


def demo_logins_path() -> Path:
    return settings.SWITCHYARD_VAR_DIR / "demo" / "logins.json"


def demo_user_reset(*, username: str, group: str | None, password: str):
    """Create or reset one demo user (a superuser when `group` is None); audited, without
    the password. Switchyard itself is the actor."""
    user, created = get_user_model().objects.get_or_create(username=username)
    user.set_password(password)
    user.is_superuser = user.is_staff = group is None
    user.save()
    user.groups.set([Group.objects.get_or_create(name=group)[0]] if group else [])
    audit_record(
        actor=None,
        action="user.demo_created" if created else "user.demo_reset",
        obj=user,
        details={"group": group or "superuser", "via": "make demo"},
    )
    return user


@transaction.atomic
def demo_users_create() -> list[dict]:
    """Create or reset one user per role (and a superuser); returns their new passwords."""
    logins = []
    for username, group, role in DEMO_USERS:
        password = secrets.token_urlsafe(9)
        demo_user_reset(username=username, group=group, password=password)
        logins.append({"username": username, "password": password, "role": role})
    path = demo_logins_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(logins, indent=1))
    path.chmod(0o600)
    return logins


def demo_logins() -> list[dict]:
    return json.loads(demo_logins_path().read_text())


BANNER_RULE = "=" * 64


def banner_lines(*, url: str, logins: list[dict], log_dir: str) -> list[str]:
    """The banner `make demo` prints last: where the console is, the logins, the logs."""
    width = max(len(x["username"]) for x in logins)
    return [
        BANNER_RULE,
        f"  Switchyard demo console: {url}",
        "  Demo logins (DEMO ONLY, new passwords each run):",
        *(f"    {x['username']:<{width}}  {x['password']}  ({x['role']})" for x in logins),
        f"  Logs of every process: {log_dir}/",
        "  Ctrl-C stops everything.",
        BANNER_RULE,
    ]
