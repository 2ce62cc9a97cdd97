"""Pure helpers of the console: durations of long actions, CSV cells, the home's tabs."""

from datetime import UTC, datetime, timedelta

from console.audit_views import _safe
from console.home import default_tab
from console.templatetags.console_time import took

T0 = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


def test_took_says_how_long_a_finished_action_took():
    assert took(T0, T0 + timedelta(seconds=4.25)) == "took 4.2 s"
    assert took(T0, T0 + timedelta(minutes=3, seconds=5)) == "took 3 min 5 s"
    assert took(T0, T0 + timedelta(hours=2, minutes=1)) == "took 2 h 1 min"
    assert took(None, None) == ""
    assert took(datetime.now(UTC) - timedelta(seconds=2), None).startswith("running for 2")


def test_csv_cells_never_start_a_formula():
    assert _safe("=HYPERLINK(1)") == "'=HYPERLINK(1)"
    assert _safe("@SUM(A1)") == "'@SUM(A1)"
    assert _safe("risk_score v1") == "risk_score v1"


def test_the_home_opens_on_the_first_role_held():
    assert default_tab(["algorithm"]) == "models"
    assert default_tab(["managers"]) == "costs"
    assert default_tab(["algorithm", "release-managers"]) == "releases"
    assert default_tab([]) == "releases"
