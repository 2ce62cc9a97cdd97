"""The unrouted share a release start reads (releases/selectors.py `unrouted_recent`): which
minutes of telemetry rollups it compares with which lines of the router's access log. The
rollups are rows as the collector writes them and the log lines as the rendered nginx config
writes them (tests/integration/test_nginx_grpc.py and tests/releases/test_release_unrouted.py
produce both for real)."""

import json
import math
import time
from datetime import UTC, datetime

import pytest

from deployments.services import cluster_create
from integrations.routers.access_log import LOG_FIELDS
from releases.selectors import unrouted_recent
from telemetry.models import Rollup

pytestmark = pytest.mark.django_db

NOW = math.floor(time.time() / 60.0) * 60.0 + 30.0  # mid-minute
THIS_MINUTE = NOW - 30.0


@pytest.fixture
def cluster(make_user, tmp_path):
    rita = make_user("rita", role="release-managers")
    return cluster_create(
        actor=rita,
        name="measured",
        environment="production",
        router={"driver": "nginx", "listen": "127.0.0.1:1", "prefix_dir": str(tmp_path / "r")},
    )


def write_log(tmp_path, entries: list[tuple[float, str]]) -> None:
    log = tmp_path / "r" / "logs" / "access.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for ts, uri in entries:
        values = dict.fromkeys(LOG_FIELDS, "")
        values.update(ts=f"{ts:.3f}", method="POST", request_uri=uri, uri=uri, status="200")
        lines.append(json.dumps(values, separators=(",", ":")) + "\n")
    log.write_text("".join(lines))


def rollup(cluster, minute: float, requests: int, *, node="n1", version="1") -> None:
    Rollup.objects.create(
        cluster=cluster,
        node_name=node,
        model_name="risk",
        version=version,
        minute=datetime.fromtimestamp(minute, tz=UTC),
        requests=requests,
        successes=requests,
    )


def split(ts: float, n: int) -> list[tuple[float, str]]:
    return [(ts + i * 0.01, "/v2/models/risk/infer") for i in range(n)]


def test_share_compares_the_same_minutes_summed_over_nodes_and_versions(cluster, tmp_path):
    earlier = THIS_MINUTE - 60.0
    rollup(cluster, earlier, 30, node="n1")
    rollup(cluster, earlier, 30, node="n2")
    rollup(cluster, THIS_MINUTE, 40, version="2")
    write_log(
        tmp_path,
        split(earlier + 1, 30)
        + [(earlier + 5, "/inference.GRPCInferenceService/ModelInfer")] * 4
        + [(earlier + 6, "/v2/models/risk/versions/1/infer")] * 3
        + split(THIS_MINUTE + 1, 20),
    )
    measure = unrouted_recent(cluster=cluster, models=["risk"], now=NOW)["risk"]
    assert (measure.triton_requests, measure.split_requests) == (100, 50)
    assert measure.share == pytest.approx(0.5)
    assert (measure.grpc_via_router, measure.versioned_via_router) == (4, 3)
    assert (measure.window_start, measure.window_end) == (earlier, THIS_MINUTE + 60.0)


def test_minutes_outside_the_window_or_before_the_routers_log_begins_are_not_compared(
    cluster, tmp_path, settings
):
    settings.SWITCHYARD_UNROUTED_WINDOW_S = 300
    rollup(cluster, THIS_MINUTE - 600, 1000)  # outside the window
    rollup(cluster, THIS_MINUTE - 120, 500)  # before the router logged anything
    rollup(cluster, THIS_MINUTE, 60)
    write_log(tmp_path, split(THIS_MINUTE + 2, 45))
    measure = unrouted_recent(cluster=cluster, models=["risk"], now=NOW)["risk"]
    assert (measure.triton_requests, measure.split_requests) == (60, 45)
    assert measure.share == pytest.approx(0.25)


def test_an_empty_router_log_means_every_request_went_around_it(cluster, tmp_path):
    rollup(cluster, THIS_MINUTE, 80)
    write_log(tmp_path, [])
    measure = unrouted_recent(cluster=cluster, models=["risk"], now=NOW)["risk"]
    assert measure.share == 1.0 and measure.unrouted_requests == 80


def test_without_telemetry_or_a_readable_log_nothing_is_measured(cluster, tmp_path):
    rollup(cluster, THIS_MINUTE, 80)
    missing_log = unrouted_recent(cluster=cluster, models=["risk", "other"], now=NOW)
    assert missing_log["risk"].share is None
    assert "access log is not readable" in missing_log["risk"].text()
    write_log(tmp_path, split(THIS_MINUTE, 3))
    no_rollups = unrouted_recent(cluster=cluster, models=["other"], now=NOW)["other"]
    assert no_rollups.share is None and "no telemetry" in no_rollups.text()


def test_a_cluster_without_a_router_has_no_unrouted_share(make_user):
    rita = make_user("rita", role="release-managers")
    plain = cluster_create(actor=rita, name="plain", environment="staging")
    assert unrouted_recent(cluster=plain, models=["risk"], now=NOW) == {}


def test_an_ensembles_split_requests_count_as_its_steps_routed(cluster, tmp_path):
    """`risk` as a step of `pipe`: 60 requests through the pipeline's split and 20 of its
    own; Triton counts all 80 as risk's (releases/graph.py: graph releases split them)."""
    rollup(cluster, THIS_MINUTE, 80)
    pipeline = [(THIS_MINUTE + 1 + i * 0.01, "/v2/models/pipe/infer") for i in range(60)]
    write_log(tmp_path, split(THIS_MINUTE + 2, 20) + pipeline)
    alone = unrouted_recent(cluster=cluster, models=["risk"], now=NOW)["risk"]
    assert alone.share == pytest.approx(0.75)
    via = unrouted_recent(cluster=cluster, models=["risk"], now=NOW, via={"risk": ["pipe"]})
    assert (via["risk"].split_requests, via["risk"].share) == (80, 0.0)
