"""The Reports page in Chromium, over rollups of a real Triton node with real traffic."""

import pytest

from tests.reports.conftest import write_scraped

pytestmark = [pytest.mark.browser, pytest.mark.triton, pytest.mark.django_db(transaction=True)]


def _sign_in(page, live_server, username: str) -> None:
    page.goto(f"{live_server.url}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", f"pw-{username}")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")


def test_manager_opens_the_overview_and_sees_the_chart_the_table_and_the_ghosts(
    live_server, page, make_user, scraped
):
    _start, names = write_scraped(scraped)
    make_user("max", role="managers")
    _sign_in(page, live_server, "max")
    page.click("nav >> text=Reports")
    page.wait_for_selector("[data-testid=cost-chart] .main-svg", timeout=20000)
    legend = page.inner_text("[data-testid=cost-chart]")
    assert "idle" in legend and "unknown" in legend
    table = page.inner_text("[data-testid=cost-table]")
    assert names["busy"] in table and names["half"] in table
    ghosts = page.inner_text("[data-testid=ghost-list]")
    assert names["ghost"] in ghosts and names["busy"] not in ghosts
    assert "Unload" not in ghosts  # only release managers unload
    assert "USD" in page.inner_text("[data-testid=cost-totals]")


def test_release_manager_gets_the_unload_button_on_a_ghost(live_server, page, make_user, scraped):
    _start, names = write_scraped(scraped)
    make_user("rita", role="release-managers")
    _sign_in(page, live_server, "rita")
    page.goto(f"{live_server.url}/reports/?range=3h&chart=model")
    row = page.locator("[data-testid=ghost-list] tr", has_text=names["ghost"])
    assert row.locator("button", has_text="Unload").count() == 1
