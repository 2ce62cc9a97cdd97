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


def test_the_cost_table_shows_each_kind_and_filters_by_one(live_server, page, make_user, scraped):
    _start, names = write_scraped(scraped)
    make_user("max", role="managers")
    _sign_in(page, live_server, "max")
    page.goto(f"{live_server.url}/reports/?range=3h&group_by=model")
    headings = page.inner_text("[data-testid=cost-table] thead")
    assert all(h in headings for h in ("Serving", "Validation", "Benchmark"))
    busy = page.locator("[data-testid=cost-table] tbody tr", has_text=names["busy"])
    cost = busy.locator("td").nth(1).inner_text()
    assert busy.locator("td[data-kind=serving]").inner_text() == cost != "0.00"
    assert busy.locator("td[data-kind=validation]").inner_text() == "0.00"
    page.select_option("[data-testid=cost-kind]", "benchmark")
    page.click("form[aria-label='Report range'] >> text=Show")
    page.wait_for_url("**kind=benchmark**")
    assert names["busy"] not in page.inner_text("[data-testid=cost-table]")
    assert "benchmarks only" in page.inner_text("main")
    assert page.input_value("[data-testid=cost-kind]") == "benchmark"
    page.select_option("[data-testid=cost-kind]", "serving")
    page.click("form[aria-label='Report range'] >> text=Show")
    page.wait_for_url("**kind=serving**")
    assert names["busy"] in page.inner_text("[data-testid=cost-table]")
