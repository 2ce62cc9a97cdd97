"""Shared steps of the browser tests."""

from pathlib import Path

from django.conf import settings


def login(page, base: str, username: str) -> None:
    """Sign in through the form (make_user's password is pw-<username>)."""
    page.goto(f"{base}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", f"pw-{username}")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")


def screenshot(page, name: str) -> Path:
    """Save a full-page screenshot under var/test-artifacts/ (git-ignored)."""
    folder = Path(settings.SWITCHYARD_VAR_DIR) / "test-artifacts"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
