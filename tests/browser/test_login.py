"""The login page in Debian's Chromium through Playwright; a demo user signs in."""

import pytest

from demo.users import demo_users_create

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_demo_user_signs_in_and_sees_the_home_page(live_server, page, tmp_path, settings):
    settings.SWITCHYARD_VAR_DIR = tmp_path
    ada = next(x for x in demo_users_create() if x["username"] == "ada")

    page.goto(f"{live_server.url}/")
    assert page.url.startswith(f"{live_server.url}/login/")  # signed-out users are sent here
    bootstrap = page.evaluate("getComputedStyle(document.body).fontFamily")
    assert "system-ui" in bootstrap  # Bootstrap's CSS was served by the app itself

    page.fill("#id_username", "ada")
    page.fill("#id_password", ada["password"])
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    assert page.inner_text("[data-testid=current-user]") == "ada"
    assert "roles: algorithm" in page.inner_text("main")
    assert page.is_visible("#health-panel")


def test_wrong_password_is_refused_with_a_message(live_server, page, make_user):
    make_user("rita", role="release-managers")
    page.goto(f"{live_server.url}/login/")
    page.fill("#id_username", "rita")
    page.fill("#id_password", "not-her-password")
    page.click("button[type=submit]")
    assert "didn't match" in page.inner_text(".alert-danger")
    assert page.url.startswith(f"{live_server.url}/login/")
