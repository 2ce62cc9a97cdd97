"""The start warnings' rule (releases/warnings.py): the rate a first step needs, and the SLA."""

import pytest

from models_registry.sla import sla_warning
from releases.warnings import TrafficPlan, needed_rate, traffic_warning

PLAN = TrafficPlan(
    first_weight=10,
    interval_s=30,
    min_requests=50,
    max_inconclusive_checks=10,
    on_inconclusive="pause",
)


def test_the_rate_a_first_step_needs_is_min_requests_over_its_share_of_an_interval():
    assert needed_rate(PLAN) == pytest.approx(50 / 3)


def test_the_issue_s_15_requests_a_second_at_10_percent_are_too_few_and_say_so():
    text = traffic_warning(PLAN, routed_requests=15 * 300, window_s=300)
    assert text is not None
    assert "15.00 req/s" in text and "about 45.0 candidate requests per 30 s" in text
    assert "under min_requests (50)" in text and "after 10 the release pauses" in text
    assert "at least 16.67 req/s" in text


def test_enough_traffic_or_no_measure_gives_no_warning():
    assert traffic_warning(PLAN, routed_requests=17 * 300, window_s=300) is None
    assert traffic_warning(PLAN, routed_requests=0, window_s=0) is None


def test_on_inconclusive_rollback_is_named():
    plan = TrafficPlan(5, 10, 50, 3, "rollback")
    assert "rolls back (on_inconclusive: rollback)" in traffic_warning(
        plan, routed_requests=0, window_s=60
    )


def test_a_model_without_any_sla_value_is_warned_about():
    assert sla_warning({}, model="m") and sla_warning({"p99_latency_ms": None}, model="m")
    assert sla_warning({"p99_latency_ms": 20.0, "min_success_rate": None}, model="m") is None
    assert "`switchyard model sla set m`" in sla_warning({}, model="m")
