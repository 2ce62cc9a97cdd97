"""Demo-only helpers for `make demo`: users per role with fresh, printed passwords."""

import json
import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction

DEMO_USERS = (
    ("ada", "algorithm", "algorithm team"),
    ("rita", "release-managers", "release manager"),
    ("max", "managers", "manager"),
    ("admin", None, "superuser"),
)


def demo_logins_path() -> Path:
    return settings.SWITCHYARD_VAR_DIR / "demo" / "logins.json"


@transaction.atomic
def demo_users_create() -> list[dict]:
    """Create or reset one user per role (and a superuser); returns their new passwords."""
    User = get_user_model()
    logins = []
    for username, group, role in DEMO_USERS:
        password = secrets.token_urlsafe(9)
        user, _ = User.objects.get_or_create(username=username)
        user.set_password(password)
        user.is_superuser = user.is_staff = group is None
        user.save()
        user.groups.set([Group.objects.get_or_create(name=group)[0]] if group else [])
        logins.append({"username": username, "password": password, "role": role})
    path = demo_logins_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(logins, indent=1))
    path.chmod(0o600)
    return logins


def demo_logins() -> list[dict]:
    return json.loads(demo_logins_path().read_text())
