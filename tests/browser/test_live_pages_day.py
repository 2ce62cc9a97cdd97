"""The live pages and the cockpit open with a day of history in one render per chart.

A day of per-minute rollups for 20 series per page (tests/telemetry/day_history.py), real
PostgreSQL, Redis, daphne and Chromium. window.Plotly's drawing functions are wrapped
before any page script runs, so the test counts the calls each chart costs (not seconds).
"""

import pytest
from django.db import transaction

from tests.browser.helpers import login
from tests.release_setup import release_world
from tests.telemetry.day_history import MINUTES, day_release, day_rollups

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Every call of a drawing function, by the id of the chart it drew: window.__plotlyCalls.
COUNT_PLOTLY = """
(() => {
  const calls = window.__plotlyCalls = [];
  const names = ["newPlot", "react", "extendTraces", "addTraces", "restyle", "update"];
  let plotly;
  Object.defineProperty(window, "Plotly", {
    configurable: true,
    get() { return plotly; },
    set(value) {
      names.forEach((name) => {
        const original = value[name];
        value[name] = function (gd, ...rest) {
          const el = typeof gd === "string" ? document.getElementById(gd) : gd;
          calls.push({ fn: name, id: el && el.id });
          return original.call(this, gd, ...rest);
        };
      });
      plotly = value;
    },
  });
})();
"""

TRAFFIC = ["chart-rate", "chart-success", "chart-latency", "chart-queue"]
NODE = ["chart-cpu", "chart-gpu", "chart-mem"]
COCKPIT = ["chart-success", "chart-p99", "chart-rps", "chart-queue", "chart-guard"]
# "Last 24 h" is counted from when the page asks: writing the day takes minutes on a shared
# CPU, so the oldest minutes may have left the range by then (the API tests count exactly).
DAY_POINTS = MINUTES - 30
# A chart asks for at most a point per pixel of its width (under 1,441 px in the test's
# 1280 px window): the day comes as 5-minute sums.
STEP_MIN = 5


@pytest.fixture
def day(daphne_server, settings, tmp_path, make_user):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    with transaction.atomic():  # as a test database's transaction would hold it
        world = release_world(make_user)
    day_rollups()
    return {**world, "release": day_release(world), "base": f"http://{daphne_server}"}


def _opened(page, url: str) -> dict:
    """Open `url`, wait for the page's own "every chart drawn" mark; the Plotly calls by
    chart and what each chart holds."""
    page.goto(url)
    page.wait_for_function(
        "performance.getEntriesByName('switchyard:charts-drawn').length > 0", timeout=60000
    )
    return page.evaluate(
        """() => {
          const byChart = {};
          window.__plotlyCalls.forEach((c) => {
            (byChart[c.id] = byChart[c.id] || []).push(c.fn);
          });
          const held = {}, spans = {};
          document.querySelectorAll(".js-plotly-plot").forEach((el) => {
            held[el.id] = (el.data || []).map((t) => (t.x || []).length);
            spans[el.id] = (el.data || []).map((t) =>
              (t.x || []).length ? (new Date(t.x[t.x.length - 1]) - new Date(t.x[0])) / 60000 : 0);
          });
          return { calls: byChart, held: held, spans: spans };
        }"""
    )


def _day_series(opened: dict, chart: str, series: int) -> None:
    """`series` traces on `chart`, each a day of history at 5-minute resolution."""
    held, spans = opened["held"][chart], opened["spans"][chart]
    assert len(held) == series
    assert all(n >= DAY_POINTS // STEP_MIN for n in held), held
    assert all(minutes >= DAY_POINTS - 2 * STEP_MIN for minutes in spans), spans


def test_live_pages_open_a_day_of_20_series_in_one_render_per_chart(day, page):
    page.add_init_script(COUNT_PLOTLY)
    login(page, day["base"], "rita")
    model = _opened(page, f"{day['base']}/models/risk_score/live/?range=24h")
    assert model["calls"] == {chart: ["react"] for chart in TRAFFIC}
    for chart in ("chart-rate", "chart-success", "chart-queue"):
        _day_series(model, chart, 20)
    _day_series(model, "chart-latency", 40)  # avg and p99 of each
    assert page.locator("[data-testid=history-step]").inner_text() == "5m"
    assert page.locator("[data-range='24h']").get_attribute("aria-pressed") == "true"

    cluster = _opened(page, f"{day['base']}/clusters/prod/live/?range=24h")
    assert cluster["calls"] == {chart: ["react"] for chart in TRAFFIC + NODE}
    _day_series(cluster, "chart-rate", 20)
    _day_series(cluster, "chart-cpu", 2)
    _day_series(cluster, "chart-gpu", 2)
    assert cluster["held"]["chart-mem"] == []  # not in rollups: it says so instead
    note = page.locator("[data-testid=empty-chart-mem]")
    assert "not kept in rollups" in note.inner_text()

    # Back to the live window and to the day again: one more render per chart each time.
    page.click("[data-range='live']")
    page.click("[data-range='24h']")
    page.wait_for_function(
        "performance.getEntriesByName('switchyard:charts-drawn').length >= 3", timeout=60000
    )
    calls = page.evaluate("window.__plotlyCalls.filter((c) => c.id === 'chart-rate')")
    assert [c["fn"] for c in calls] == ["react", "react", "react"]


def test_cockpit_opens_a_day_of_intervals_in_one_render_per_chart(day, page):
    page.add_init_script(COUNT_PLOTLY)
    login(page, day["base"], "rita")
    url = f"{day['base']}/releases/{day['release'].pk}/"
    opened = _opened(page, url)
    assert opened["calls"] == {chart: ["react"] for chart in COCKPIT}
    for chart in COCKPIT[:4]:  # baseline and candidate, a point per interval
        assert opened["held"][chart][:2] == [MINUTES, MINUTES]
    assert opened["held"]["chart-guard"][0] == 600
    # The cockpit refetches its changing part; charts whose data did not change are kept.
    page.wait_for_function(
        "Number(document.getElementById('cockpit-live').dataset.refreshed || 0) >= 1",
        timeout=30000,
    )
    again = page.evaluate("window.__plotlyCalls.length")
    assert again == len(COCKPIT)
