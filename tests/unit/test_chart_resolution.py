"""The resolution a chart's range is drawn at (telemetry/resolution.py, pure)."""

import pytest

from telemetry.resolution import MAX_POINTS_PER_SERIES, STEPS, buckets, step_for

HOUR, DAY = 3600, 86400


@pytest.mark.parametrize(
    ("span_s", "name"),
    [
        (15 * 60, "1m"),
        (HOUR, "1m"),
        (DAY, "1m"),  # 1,441 minutes: a day stays at full resolution
        (33 * HOUR, "1m"),
        (34 * HOUR, "5m"),
        (7 * DAY, "1h"),  # 2,017 five-minute buckets would pass the budget
        (6 * DAY, "5m"),
        (30 * DAY, "1h"),
        (90 * DAY, "1d"),
        (365 * DAY, "1d"),
    ],
)
def test_step_is_the_finest_that_fits_the_budget(span_s, name):
    assert step_for(span_s).name == name


@pytest.mark.parametrize("span_s", [1, 60, HOUR, DAY, 2 * DAY, 10 * DAY, 60 * DAY, 365 * DAY])
def test_no_range_of_up_to_a_year_sends_more_than_the_budget(span_s):
    assert buckets(span_s, step_for(span_s)) <= MAX_POINTS_PER_SERIES


def test_a_smaller_budget_coarsens_the_step():
    # 40 series sharing a 40,000-point answer get 1,000 points each: a day goes to 5 minutes.
    assert step_for(DAY, max_points=1000).name == "5m"
    assert step_for(DAY, max_points=1).name == "1d"  # nothing fits: the coarsest step


def test_buckets_count_a_partial_first_bucket():
    assert buckets(DAY, STEPS[0]) == 1441
    assert buckets(0, STEPS[0]) == 1 and buckets(-5, STEPS[1]) == 1
