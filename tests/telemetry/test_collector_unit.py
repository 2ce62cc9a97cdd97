"""The collector's tick on real captures served by an injected fetch: points, resets,
stale nodes, and per-minute rollups written to PostgreSQL."""

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from deployments.models import TritonCluster
from telemetry import services
from telemetry.collector import Collector, ScrapeSource, Target
from telemetry.models import Rollup
from telemetry.runner import store_rollups
from telemetry.scrape import ScrapeError
from tests.conftest import in_thread

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "metrics"
T0 = 1_700_000_000.0 - (1_700_000_000.0 % 60)  # a minute boundary


class Replay:
    """fetch() that answers each URL with the next capture in its list (None = no answer)."""

    def __init__(self, **plans: list[str | None]) -> None:
        self.plans = {url: list(files) for url, files in plans.items()}

    async def __call__(self, url: str, timeout_s: float) -> str:
        name = self.plans[url].pop(0)
        if name is None:
            raise ScrapeError("connection refused")
        return (FIXTURES / name).read_text()


def run(coro):
    return in_thread(asyncio.run, coro)


def points(payloads: dict, group: str, kind: str = "point") -> list[dict]:
    return [p for p in payloads.get(group, []) if p["type"] == kind]


def _collector(fetch, store=None) -> Collector:
    source = ScrapeSource([Target("prod", "n1", "u1")], fetch=fetch)
    return Collector([source], store=store)


def test_second_scrape_gives_rates_per_model_version_and_a_cluster_aggregate():
    collector = _collector(Replay(u1=["pair_before.txt", "pair_after.txt"]))
    first = run(collector.tick(T0))
    assert points(first, "cluster-prod") == []  # a baseline: no rates yet
    assert points(first, "cluster-prod", "node")[0]["stale"] is False

    second = run(collector.tick(T0 + 10))
    by_key = {(p["node"], p["version"]): p for p in points(second, "cluster-prod")}
    v2 = by_key[("n1", "2")]
    assert v2["model"] == "risk_score" and v2["request_rate"] == pytest.approx(8.0)
    assert v2["success_rate"] == 100.0 and v2["status"] == "ok"
    v3 = by_key[("n1", "3")]
    assert v3["request_rate"] > 5.0 and v3["success_rate"] < 100.0  # v3 fails some requests
    assert by_key[("", "2")]["request_rate"] == pytest.approx(8.0)  # aggregate over nodes
    assert points(second, "model-risk_score") == [
        p for p in points(second, "cluster-prod") if p["model"] == "risk_score"
    ]


def test_counter_reset_gives_no_point_and_never_a_negative_rate():
    collector = _collector(Replay(u1=["pair_before.txt", "pair_after.txt", "after_restart.txt"]))
    run(collector.tick(T0))
    run(collector.tick(T0 + 10))
    after = run(collector.tick(T0 + 20))
    versions = {(p["model"], p["version"]) for p in points(after, "cluster-prod")}
    assert ("risk_score", "3") not in versions
    assert all(p["request_rate"] >= 0 for p in points(after, "cluster-prod"))


def test_node_that_does_not_answer_is_stale_and_the_next_answer_is_a_new_baseline():
    plan = ["pair_before.txt", None, "pair_after.txt", "pair_after.txt"]
    collector = _collector(Replay(u1=plan))
    run(collector.tick(T0))
    down = run(collector.tick(T0 + 2))
    node = points(down, "cluster-prod", "node")[0]
    assert node["stale"] is True and node["cpu_util"] is None and "refused" in node["error"]
    back = run(collector.tick(T0 + 4))
    assert points(back, "cluster-prod") == []  # no interval spans the outage
    steady = run(collector.tick(T0 + 6))
    assert {p["request_rate"] for p in points(steady, "cluster-prod")} == {0.0}


@pytest.mark.django_db(transaction=True)
def test_rollups_are_written_once_a_minute_is_over(make_user):
    TritonCluster.objects.create(name="prod", environment="production")
    stored = []

    async def store(rows):
        stored.append(rows)
        await store_rollups(rows)  # the collector's own store: closes its connection

    plan = ["pair_before.txt", "pair_after.txt", "pair_after.txt", "pair_after.txt"]
    collector = _collector(Replay(u1=plan), store=store)
    run(collector.tick(T0 + 50))
    run(collector.tick(T0 + 55))  # the deltas of this interval belong to minute T0
    assert stored == []
    run(collector.tick(T0 + 61))  # minute T0 is over: written
    assert len(stored) == 1
    minute = datetime.fromtimestamp(T0, tz=UTC)
    v2 = Rollup.objects.get(minute=minute, model_name="risk_score", version="2")
    assert (v2.requests, v2.successes, v2.failures, v2.node_name) == (80, 80, 0, "n1")
    assert v2.request_us > 0 and v2.cpu_util_avg is not None
    assert Rollup.objects.filter(minute=minute, model_name="").count() == 1  # the node row
    run(collector.flush(None))  # shutdown writes the minute in progress
    assert Rollup.objects.filter(minute=minute + timedelta(minutes=1)).exists()


@pytest.mark.django_db(transaction=True)
def test_rollups_of_a_failed_store_are_written_by_the_next_flush(make_user):
    from psycopg import OperationalError

    TritonCluster.objects.create(name="prod", environment="production")
    calls = []

    async def store(rows):  # the real write, after the database was away once
        calls.append(len(rows))
        if len(calls) == 1:
            raise OperationalError("connection to server at 127.0.0.1 failed")
        await store_rollups(rows)  # the collector's own store: closes its connection

    plan = ["pair_before.txt", "pair_after.txt", "pair_after.txt", "pair_after.txt"]
    collector = _collector(Replay(u1=plan), store=store)
    run(collector.tick(T0 + 50))
    run(collector.tick(T0 + 55))
    run(collector.tick(T0 + 61))  # minute T0 is over: the store fails
    assert len(calls) == 1 and not Rollup.objects.exists() and collector.unstored
    run(collector.tick(T0 + 125))  # minute T0 + 1 is over too: both go now
    assert len(calls) == 2 and calls[1] > calls[0] and not collector.unstored
    minute = datetime.fromtimestamp(T0, tz=UTC)
    v2 = Rollup.objects.get(minute=minute, model_name="risk_score", version="2")
    assert v2.requests == 80  # written once, not twice
    assert Rollup.objects.filter(minute=minute + timedelta(minutes=1)).exists()


@pytest.mark.django_db
def test_a_minute_written_twice_adds_up_and_retention_deletes_old_rows(settings):
    from telemetry.rollups import RollupRow

    TritonCluster.objects.create(name="prod", environment="production")
    row = RollupRow("prod", "n1", "m", "1", T0, requests=10, successes=9, failures=1, p99_ms=5.0)
    services.rollups_write(rows=[row])
    services.rollups_write(rows=[RollupRow("prod", "n1", "m", "1", T0, requests=5, p99_ms=7.0)])
    kept = Rollup.objects.get()
    assert (kept.requests, kept.successes, kept.p99_ms) == (15, 9, 7.0)
    settings.TELEMETRY_ROLLUP_RETENTION_DAYS = 1
    now = datetime.fromtimestamp(T0, tz=UTC) + timedelta(days=2)
    assert services.rollups_cleanup(now=now) == 1
    assert not Rollup.objects.exists()


class OwnCounters:
    """own_read/own_forget over readings the test sets (the Redis side is own_traffic's)."""

    def __init__(self) -> None:
        self.counts: dict = {}
        self.forgotten: list = []

    async def read(self, nodes):
        return {node: dict(self.counts) for node in nodes}

    async def forget(self, cluster, node, keys):
        self.forgotten.append((cluster, node, sorted(keys)))
        for key in keys:
            self.counts.pop(key, None)


def test_own_requests_come_off_the_rollup_and_the_live_rate_and_stay_in_their_columns():
    own = OwnCounters()
    source = ScrapeSource(
        [Target("prod", "n1", "u1")], fetch=Replay(u1=["pair_before.txt", "pair_after.txt"])
    )
    collector = Collector([source], own_read=own.read, own_forget=own.forget)
    own.counts = {("risk_score", "2", "probe"): {"success": 3.0, "failure": 0.0}}
    run(collector.tick(T0 + 50))
    own.counts = {
        ("risk_score", "2", "probe"): {"success": 8.0, "failure": 0.0},
        ("risk_score", "2", "warmup"): {"success": 1.0, "failure": 0.0},
    }
    second = run(collector.tick(T0 + 55))
    v2 = next(p for p in points(second, "cluster-prod") if (p["node"], p["version"]) == ("n1", "2"))
    assert v2["request_rate"] == pytest.approx((80 - 6) / 5.0)  # the clients' rate
    rows = run(collector.flush(None))
    row = next(r for r in rows if (r.model, r.version) == ("risk_score", "2"))
    assert (row.requests, row.successes, row.probe_requests, row.warmup_requests) == (74, 74, 5, 1)
    assert row.own_successes == 6 and not row.split_inexact


def test_own_counters_of_a_series_the_node_stopped_showing_are_forgotten_after_a_while():
    own = OwnCounters()
    plan = ["pair_before.txt", "pair_after.txt", "pair_after.txt"]
    collector = Collector(
        [ScrapeSource([Target("prod", "n1", "u1")], fetch=Replay(u1=plan))],
        own_read=own.read,
        own_forget=own.forget,
    )
    gone = ("gone_model--smoke-1-abc", "1", "smoke")
    own.counts = {
        gone: {"success": 1.0, "failure": 0.0},
        ("risk_score", "2", "probe"): {"success": 1.0},
    }
    run(collector.tick(T0))
    run(collector.tick(T0 + 300))
    assert own.forgotten == []
    run(collector.tick(T0 + 601))
    assert own.forgotten == [("prod", "n1", [gone])]  # the version the node shows is kept


def test_a_counter_reset_with_own_requests_flags_the_minute_and_keeps_them_apart():
    own = OwnCounters()
    plan = ["pair_before.txt", "pair_after.txt", "after_restart.txt"]
    fetch = Replay(u1=plan)
    collector = Collector(
        [ScrapeSource([Target("prod", "n1", "u1")], fetch=fetch)], own_read=own.read
    )
    run(collector.tick(T0 + 10))
    run(collector.tick(T0 + 20))
    own.counts = {("risk_score", "3", "probe"): {"success": 2.0, "failure": 0.0}}
    run(collector.tick(T0 + 30))  # v3 restarted: its interval cannot be split
    rows = run(collector.flush(None))
    v3 = next(r for r in rows if (r.model, r.version) == ("risk_score", "3"))
    assert v3.split_inexact and v3.probe_requests == 2
    v2 = next(r for r in rows if (r.model, r.version) == ("risk_score", "2"))
    assert not v2.split_inexact


def test_own_requests_counted_after_the_scrape_that_showed_them_are_taken_back():
    own = OwnCounters()
    plan = ["pair_before.txt", "pair_after.txt", "pair_after.txt"]
    fetch = Replay(u1=plan)
    collector = Collector(
        [ScrapeSource([Target("prod", "n1", "u1")], fetch=fetch)], own_read=own.read
    )
    run(collector.tick(T0 + 50))
    run(collector.tick(T0 + 55))  # Triton shows 80 requests, 5 of them benchmark ones
    own.counts = {("risk_score", "2", "benchmark"): {"success": 5.0, "failure": 0.0}}
    run(collector.tick(T0 + 58))  # ... counted only now
    rows = run(collector.flush(None))
    v2 = next(r for r in rows if (r.model, r.version) == ("risk_score", "2"))
    assert (v2.requests, v2.successes, v2.benchmark_requests) == (75, 75, 5)
    assert not v2.split_inexact


class Renamed(Replay):
    """Replay with risk_score v3's series reported under its config-canary sibling name."""

    async def __call__(self, url: str, timeout_s: float) -> str:
        text = await super().__call__(url, timeout_s)
        return text.replace('model="risk_score",version="3"', 'model="risk_score--c3",version="3"')


def test_a_config_canarys_sibling_is_shown_and_rolled_up_as_its_model():
    fetch = Renamed(u1=["pair_before.txt", "pair_after.txt"])
    assert "risk_score--c3" in run(fetch("u1", 1.0))  # the capture has v3's series
    collector = _collector(Renamed(u1=["pair_before.txt", "pair_after.txt"]))
    run(collector.tick(T0))
    second = run(collector.tick(T0 + 10))
    seen = {(p["node"], p["model"], p["version"]) for p in points(second, "cluster-prod")}
    assert ("n1", "risk_score", "3") in seen and ("", "risk_score", "3") in seen
    assert not any("--c" in model for _, model, _ in seen)
    assert "model-risk_score--c3" not in second
    buffered = {key for rows in collector.rollups.rows.values() for key in rows}
    assert ("risk_score", "3") in buffered and ("risk_score--c3", "3") not in buffered
