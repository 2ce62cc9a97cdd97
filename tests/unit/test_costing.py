"""The pure cost model: exact splits of node-minutes, idle, unknown, rounding to cents."""

from decimal import ROUND_HALF_UP, Decimal

from hypothesis import given
from hypothesis import strategies as st

from reports.costing import (
    TICKS_PER_UNIT,
    NodePrice,
    Usage,
    largest_remainder,
    minute_ticks,
    node_price,
    split_minute,
    to_cents,
)


def test_a_minute_of_a_four_decimal_price_is_a_whole_number_of_ticks():
    assert minute_ticks(Decimal("3.6000")) == 36_000
    assert minute_ticks(Decimal("0.0001")) == 1
    assert minute_ticks(Decimal("3.6")) * 60 == 3.6 * TICKS_PER_UNIT


def test_node_price_prefers_the_node_then_per_gpu_price_then_the_cluster():
    cluster = Decimal("2.4")
    assert node_price(cluster_hourly=cluster).minute_ticks == 24_000
    assert node_price(cluster_hourly=cluster, hourly=Decimal("6")).minute_ticks == 60_000
    gpu = node_price(cluster_hourly=cluster, gpu_hourly=Decimal("1.5"), gpu_count=4)
    assert gpu == NodePrice(60_000, 4)  # four GPUs: four execution slots
    assert node_price(cluster_hourly=cluster, slots=3).slots == 3
    assert node_price(cluster_hourly=cluster).slots == 1  # a CPU node runs one at a time


def test_twice_the_compute_is_charged_twice_as_much_and_the_rest_is_idle():
    price = NodePrice(60_000, 1)
    cost = split_minute(price, [Usage("a", "1", 20e6), Usage("b", "1", 10e6)])
    assert cost.allocated == {("a", "1", "serving"): 20_000, ("b", "1", "serving"): 10_000}
    assert cost.idle == 30_000 and cost.unknown == 0
    assert cost.idle_share == {("a", "1", "serving"): 15_000, ("b", "1", "serving"): 15_000}


def test_a_minute_without_a_node_rollup_is_unknown_and_charged_to_nobody():
    cost = split_minute(NodePrice(100, 1), None)
    assert cost.unknown == 100 and cost.idle == 0 and not cost.allocated


def test_a_minute_with_nothing_loaded_is_all_idle():
    cost = split_minute(NodePrice(100, 2), [])
    assert cost.idle == 100 and cost.idle_share == {}


def test_more_compute_than_capacity_shares_the_whole_minute_and_leaves_no_idle():
    cost = split_minute(NodePrice(90, 1), [Usage("a", "1", 80e6), Usage("b", "1", 40e6)])
    assert cost.allocated == {("a", "1", "serving"): 60, ("b", "1", "serving"): 30}
    assert cost.idle == 0


def test_slots_widen_the_capacity():
    cost = split_minute(NodePrice(1200, 4), [Usage("a", "1", 60e6)])
    assert cost.allocated == {("a", "1", "serving"): 300} and cost.idle == 900


usages = st.lists(
    st.builds(
        Usage,
        model=st.sampled_from(["a", "b", "c"]),
        version=st.sampled_from(["1", "2"]),
        compute_us=st.floats(min_value=0, max_value=2e8),
    ),
    unique_by=lambda u: (u.model, u.version),
)


@given(
    price=st.integers(min_value=0, max_value=10**7),
    slots=st.integers(min_value=1, max_value=8),
    usage=st.one_of(st.none(), usages),
)
def test_allocated_plus_idle_plus_unknown_is_the_node_minute_exactly(price, slots, usage):
    cost = split_minute(NodePrice(price, slots), usage)
    assert sum(cost.allocated.values()) + cost.idle + cost.unknown == price
    assert all(v >= 0 for v in cost.allocated.values()) and cost.idle >= 0
    if usage:
        assert sum(cost.idle_share.values()) == cost.idle


@given(st.dictionaries(st.text(max_size=3), st.integers(min_value=0, max_value=10**12)))
def test_cents_of_the_parts_add_up_to_the_rounded_total(ticks):
    cents = to_cents(ticks)
    exact_total = Decimal(sum(ticks.values())) / TICKS_PER_UNIT
    # The total rounds half up, as every amount the reports show does.
    assert sum(cents.values(), Decimal(0)) == exact_total.quantize(Decimal("0.01"), ROUND_HALF_UP)
    for key, amount in cents.items():
        # Largest remainder keeps a part under a cent from its share of the rounded total,
        # and rounding the total moves that share by at most half a cent.
        assert abs(amount - Decimal(ticks[key]) / TICKS_PER_UNIT) < Decimal("0.015")


@given(
    total=st.integers(min_value=0, max_value=10**9),
    weights=st.dictionaries(st.integers(), st.integers(min_value=1, max_value=10**6), min_size=1),
)
def test_largest_remainder_hands_out_exactly_the_total(total, weights):
    parts = largest_remainder(total, weights)
    assert sum(parts.values()) == total
    weight_sum = sum(weights.values())
    for k, w in weights.items():
        assert abs(parts[k] - total * w / weight_sum) < 1
