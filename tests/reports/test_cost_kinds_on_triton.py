"""A real smoke test and a real benchmark on a real Triton node, scraped by the real
collector: their node time lands on their model and version as `validation` and
`benchmark`, and no temporary name shows in any report, page or ghost list.

The collector scrapes in a thread all along, with times shifted a few minutes back, so its
rollup minutes are complete when the reports read them.
"""

import asyncio
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.test import Client
from rest_framework.test import APIClient

from benchmarks.services import benchmark_create, benchmark_run
from deployments.smoke import model_version_smoke_validate
from reports import selectors
from telemetry.collector import Collector, ScrapeSource, Target
from telemetry.services import rollups_write
from tests.benchmarks.conftest import bench_world, new_model, register_variant  # noqa: F401

pytestmark = [pytest.mark.triton, pytest.mark.django_db]

PRICE = Decimal("3600.0000")  # 1.00 a second: a benchmark's compute costs whole cents
TEMPORARY = ("--smoke-", "--bench-")


class Scraping:
    """The real collector scraping one node in a thread every 50 ms, its clock `back` behind."""

    def __init__(self, cluster: str, node, back: timedelta) -> None:
        self.rows: list = []
        self.names: set[str] = set()
        now = datetime.now(UTC)
        self.start = now.replace(second=0, microsecond=0) - back
        self.shift = now - self.start  # the collector's clock: this much behind
        source = ScrapeSource([Target(cluster, node.name, node.metrics_url)])
        self.collector = Collector([source], store=self._keep)
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    async def _keep(self, rows) -> None:
        self.rows.extend(rows)

    def _loop(self) -> None:
        while not self.stopping.is_set():
            asyncio.run(self.collector.tick((datetime.now(UTC) - self.shift).timestamp()))
            minutes = list(self.collector.rollups.rows.values())  # this thread's own buffer
            self.names |= {model for series in minutes for model, _version in series}
            self.names |= {row.model for row in self.rows}
            self.stopping.wait(0.05)

    def seen(self, marker: str) -> bool:
        """Whether an interval of a series whose name holds `marker` was rolled up."""
        return any(marker in name for name in set(self.names))

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        self.thread.join(timeout=30)
        self.rows.extend(asyncio.run(self.collector.flush(None)))


def _smoke_until_scraped(version, scraping, tries: int = 5) -> str:
    """Smoke-test `version` (again, should its temporary model come and go between two
    scrapes) until the collector rolled up an interval of it; its temporary name's start."""
    marker = f"{version.model.name}--smoke-{version.version}-"
    for _ in range(tries):
        report = model_version_smoke_validate(version_id=version.pk)
        assert report is not None and report["passed"], report
        if scraping.seen(marker):
            return marker
    pytest.fail(f"the collector never saw {marker}* loaded in {tries} smoke tests")


@pytest.fixture
def validated_and_benchmarked(bench_world, new_model):  # noqa: F811 - the imported fixtures
    """A version smoke-tested and benchmarked on the staging node while the collector
    scrapes it; (scraping, version, the minutes the reports read)."""
    staging = bench_world["staging"]
    staging.node_hourly_cost = PRICE
    staging.save(update_fields=["node_hourly_cost"])
    model = new_model(f"kinds_{uuid.uuid4().hex[:6]}")
    version = register_variant(model, bench_world["ada"], 2)
    with Scraping(staging.name, bench_world["node"], back=timedelta(minutes=8)) as scraping:
        time.sleep(0.3)  # a baseline scrape of the node
        _smoke_until_scraped(version, scraping)
        run = benchmark_create(
            version=version,
            cluster=staging,
            concurrency=[1, 2],
            duration_s=1.5,
            actor=bench_world["ada"],
        )
        run = benchmark_run(run_id=run.pk)  # the test never commits: the task body runs here
        assert run.status == "succeeded", run.error
        time.sleep(0.3)  # the unload seen
    assert scraping.seen(f"{model.name}--bench-{run.pk}-v{version.version}-")
    assert rollups_write(rows=scraping.rows) == len(scraping.rows)
    end = max(r.minute for r in scraping.rows)
    minutes = int((end - scraping.start.timestamp()) // 60) + 1
    return scraping, version, minutes


def _no_temporary_name(text: str) -> None:
    assert not any(t in text for t in TEMPORARY), text[:2000]


def test_smoke_and_benchmark_time_land_on_their_version_as_validation_and_benchmark(
    validated_and_benchmarked,
):
    scraping, version, minutes = validated_and_benchmarked
    since = scraping.start
    until = since + timedelta(minutes=minutes)
    model = version.model.name
    lines = selectors.range_lines(since, until)
    _no_temporary_name(repr(sorted(str(key) for key in lines)))
    number = str(version.version)
    mine = {key[5]: line for key, line in lines.items() if key[2:5] == ("model", model, number)}
    # The smoke test's loaded minutes take their share of the node's idle time; the
    # benchmark's requests, its compute.
    assert mine["validation"].minutes >= 1 and mine["validation"].idle_share_ticks > 0
    assert mine["benchmark"].compute_us > 0 and mine["benchmark"].requests > 0
    assert "serving" not in mine  # nothing served the version: it only was tested
    for group_by in selectors.GROUP_KEYS:
        report = selectors.cost_report(since=since, until=until, group_by=group_by)
        _no_temporary_name(repr(report["rows"]))
        assert report["total_cost"] == (PRICE / 60 * minutes).quantize(Decimal("0.01"))
        parts = report["idle_cost"] + report["unknown_cost"]
        if group_by in selectors.NODE_GROUPS:
            parts = sum(r["idle_cost"] + r["unknown_cost"] for r in report["rows"])
        parts += sum(r["cost"] for r in report["rows"])
        assert parts == report["total_cost"], group_by
        for row in report["rows"]:
            kinds = row["serving_cost"] + row["validation_cost"] + row["benchmark_cost"]
            assert row["cost"] == kinds
    by_version = selectors.cost_report(since=since, until=until, group_by="version")
    row = next(r for r in by_version["rows"] if (r["model"], r["version"]) == (model, number))
    assert row["benchmark_cost"] > 0 and row["serving_cost"] == 0
    assert row["requests"] == 0  # no client called it: tests are no traffic of its own


def test_the_kind_filter_and_the_pages_show_no_temporary_name(validated_and_benchmarked, make_user):
    scraping, version, minutes = validated_and_benchmarked
    model, number = version.model.name, str(version.version)
    api = APIClient()
    api.force_authenticate(make_user("mia", role="managers"))
    span = {
        "from": scraping.start.isoformat(),
        "to": (scraping.start + timedelta(minutes=minutes)).isoformat(),
        "group_by": "version",
    }
    for kind in ("validation", "benchmark"):
        answer = api.get("/api/v1/reports/cost/", {**span, "kind": kind})
        assert answer.status_code == 200, answer.content
        rows = answer.json()["rows"]
        # The node is the session's: an earlier test's temporary model may still be going.
        assert [(r["model"], r["version"]) for r in rows if r["model"] == model] == [
            (model, number)
        ], rows
        assert all(r["cost"] == r[f"{kind}_cost"] for r in rows), rows
        _no_temporary_name(repr(rows))
    assert api.get("/api/v1/reports/cost/", {**span, "kind": "smoke"}).status_code == 400
    csv = api.get("/api/v1/reports/cost/", {**span, "format": "csv"}).content.decode()
    _no_temporary_name(csv)
    assert "validation_cost" in csv.splitlines()[0]
    ghosts = api.get("/api/v1/reports/ghosts/", {"days": "0.01"}).json()["rows"]
    _no_temporary_name(repr(ghosts))
    assert (model, number) not in {(g["model"], g["version"]) for g in ghosts}
    pages = Client()
    pages.force_login(make_user("max", role="managers"))
    for path, params in (
        ("/reports/", {"range": "3h", "group_by": "version"}),
        ("/reports/", {"range": "3h", "group_by": "model", "kind": "benchmark"}),
        (f"/models/{model}/cost/", {"range": "24h"}),
        ("/", {"tab": "costs"}),
    ):
        page = pages.get(path, params)
        assert page.status_code == 200, path
        _no_temporary_name(page.content.decode())
