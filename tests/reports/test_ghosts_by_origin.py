"""Client traffic apart from the control plane's own, on real Triton nodes: real probes
(health.probes, the health pass's path), real client traffic (the test traffic helper,
which counts what it sent and asserts every request was answered), the real collector
reading the own-traffic counters after each scrape, then ghosts by version.

Two nodes serve `probed` (probes only: a ghost of the cluster on both nodes) and `served`
(clients on the first node, probes on both: idle on the second node, not a ghost).
"""

import asyncio
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings
from rest_framework.test import APIClient

from deployments.models import TritonCluster, TritonNode
from health.probes import Target as ProbeTarget
from health.probes import node_probes
from reports import selectors
from telemetry.collector import Collector, ScrapeSource, Target
from telemetry.models import Rollup
from telemetry.runner import own_read
from telemetry.services import rollups_write
from tests.conftest import in_thread
from tests.reports.conftest import PRICE
from tests.telemetry.live import db_cluster, load_example, traffic, unload

pytestmark = [pytest.mark.triton, pytest.mark.django_db]
CLUSTER = "origin-lab"


def _probe_pass(nodes, targets) -> int:
    """One probe of every target on every node, as the health pass sends them; the count."""
    sent = 0
    for node in nodes:
        result = node_probes(node, targets, settings.SWITCHYARD_TRITON_TIMEOUT_S)
        assert result.live and all(r.ok and r.ready for r in result.results.values()), result
        sent += len(result.results)
    return sent


@pytest.fixture(scope="module")
def origin_lab(triton_cluster):
    """Minutes 0-2 of real probes on both nodes and 20 rps of clients of `served` on the
    first; the collector's rows, the names, and how many client requests were answered."""
    suffix = uuid.uuid4().hex[:6]
    names = {k: f"{k}_{suffix}" for k in ("probed", "served")}
    nodes = triton_cluster.nodes
    configs = {
        k: load_example(nodes, example="risk_score", name=n, versions=[1]) for k, n in names.items()
    }
    # The probes read only the node's addresses and its cluster's name and key: the real
    # model classes, not saved (the database is the test's, written in each test).
    cluster = TritonCluster(name=CLUSTER)
    probe_nodes = [
        TritonNode(
            cluster=cluster,
            name=n.name,
            http_url=n.http_url,
            grpc_url=n.grpc_url,
            metrics_url=n.metrics_url,
        )
        for n in nodes
    ]
    targets = [ProbeTarget(n, 1, i, "", configs[k]) for i, (k, n) in enumerate(names.items())]
    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=8)
    t0 = start.timestamp()
    rows = []

    async def keep(finished) -> None:
        rows.extend(finished)

    source = ScrapeSource([Target(CLUSTER, n.name, n.metrics_url) for n in nodes])
    collector = Collector([source], store=keep, own_read=own_read)

    def tick(at: float) -> None:
        in_thread(asyncio.run, collector.tick(at))

    passes = 0
    try:
        tick(t0 + 1)  # the baseline of Triton's counters and of the own ones
        with traffic([nodes[0]], names["served"], configs["served"], version="1", rps=20) as t:
            for minute in range(2):
                for second in (20, 40, 59):
                    _probe_pass(probe_nodes, targets)
                    passes += 1
                    time.sleep(1.0)
                    tick(t0 + minute * 60 + second)
        answered = t.stats.by_status["200"]  # every request was answered 200 (asserted)
        _probe_pass(probe_nodes, targets)
        passes += 1
        time.sleep(1.0)
        tick(t0 + 2 * 60 + 30)  # the last requests in flight are in this scrape
        in_thread(asyncio.run, collector.flush(None))
    finally:
        for name in names.values():
            unload(nodes, name)
    return {
        "start": start,
        "rows": rows,
        "names": names,
        "nodes": [n.name for n in nodes],
        "answered": answered,
        "passes": passes,
    }


@pytest.fixture
def lab(origin_lab):
    cluster = db_cluster(CLUSTER, [], node_hourly_cost=PRICE)
    for i, name in enumerate(origin_lab["nodes"]):
        cluster.nodes.create(name=name, http_url=f"http://127.0.0.1:{9 + i}")
    assert rollups_write(rows=origin_lab["rows"]) == len(origin_lab["rows"])
    return origin_lab


def _sums(model: str, node: str | None = None) -> dict:
    rows = Rollup.objects.filter(cluster__name=CLUSTER, model_name=model, version="1")
    if node is not None:
        rows = rows.filter(node_name=node)
    fields = ("requests", "successes", "failures", "probe_requests", "warmup_requests")
    out = {f: sum(getattr(r, f) for r in rows) for f in fields}
    out["split_inexact"] = any(r.split_inexact for r in rows)
    return out


def _ghosts(make_user) -> dict:
    client = APIClient()
    client.force_authenticate(make_user("mia", role="managers"))
    answer = client.get("/api/v1/reports/ghosts/", {"days": "0.01"})  # 14.4 minutes
    assert answer.status_code == 200
    return answer.json()


def test_a_version_with_probes_and_no_clients_is_a_ghost_with_its_probes_counted_apart(
    lab, make_user
):
    name, nodes = lab["names"]["probed"], lab["nodes"]
    for node in nodes:
        counts = _sums(name, node)
        assert counts["requests"] == 0 and counts["successes"] == 0, counts
        assert counts["probe_requests"] == lab["passes"] and not counts["split_inexact"]
    report = selectors.cost_report(
        since=lab["start"], until=lab["start"] + timedelta(minutes=4), group_by="version"
    )
    row = next(r for r in report["rows"] if r["model"] == name)
    assert row["requests"] == 0 and row["cost_per_1k"] is None
    answer = _ghosts(make_user)
    ghosts = [r for r in answer["rows"] if r["model"] == name]
    assert len(ghosts) == 1, answer
    ghost = ghosts[0]
    assert ghost["cluster"] == CLUSTER and ghost["nodes"] == sorted(nodes)
    assert ghost["node_count"] == 2 and ghost["cost"] > 0
    assert not [r for r in answer["idle_on_nodes"] if r["model"] == name]


def test_a_version_with_client_traffic_counts_exactly_the_requests_clients_sent(lab):
    name, (serving, idle) = lab["names"]["served"], lab["nodes"]
    counts = _sums(name, serving)
    assert counts["requests"] == lab["answered"] > 0, counts
    assert counts["successes"] == lab["answered"] and counts["failures"] == 0
    assert counts["probe_requests"] == lab["passes"] and not counts["split_inexact"]
    assert _sums(name, idle)["requests"] == 0
    report = selectors.cost_report(
        since=lab["start"], until=lab["start"] + timedelta(minutes=4), group_by="version"
    )
    row = next(r for r in report["rows"] if r["model"] == name)
    assert row["requests"] == row["successes"] == lab["answered"]


def test_a_version_idle_on_one_node_and_serving_on_another_is_idle_there_not_a_ghost(
    lab, make_user
):
    name, (serving, idle) = lab["names"]["served"], lab["nodes"]
    answer = _ghosts(make_user)
    assert not [r for r in answer["rows"] if r["model"] == name]
    rows = [r for r in answer["idle_on_nodes"] if r["model"] == name]
    assert len(rows) == 1, answer
    row = rows[0]
    assert row["nodes"] == [idle] and row["serving_nodes"] == [serving]
    assert row["node_count"] == 1 and row["projected_monthly_cost"] >= row["cost"] > 0


def test_the_reports_page_lists_the_ghost_with_its_nodes_and_the_idle_version_apart(
    lab, make_user, client
):
    client.force_login(make_user("rita", role="release-managers"))
    page = client.get("/reports/", {"range": "3h"}).content.decode()
    ghosts = page[
        page.index('data-testid="ghost-list"') : page.index('data-testid="idle-on-nodes"')
    ]
    idle = page[page.index('data-testid="idle-on-nodes"') :]
    probed, served = lab["names"]["probed"], lab["names"]["served"]
    assert probed in ghosts and ", ".join(sorted(lab["nodes"])) in ghosts
    assert f"/clusters/{CLUSTER}/models/{probed}/unload" in ghosts  # Unload targets the cluster
    assert served not in ghosts and served in idle.split("</table>")[0]
