"""A router's logs never fill the disk: beat's `releases.router_logs_rotate` moves each log
above SWITCHYARD_ROUTER_LOG_MAX_BYTES to `<name>.1` and a running nginx reopens its logs
(real nginx, real Triton nodes, PostgreSQL)."""

import http.client

import pytest

from releases.routing import router_for, router_state
from releases.tasks import router_logs_rotate
from tests.conftest import wait_for
from tests.nodes import register_nodes
from tests.releases.test_router_sync import _live, _nginx_cluster

pytestmark = [pytest.mark.triton, pytest.mark.django_db]


def _requests(port: int, n: int, path: str) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        for _ in range(n):
            conn.request("GET", path)
            conn.getresponse().read()
    finally:
        conn.close()


def test_a_log_over_the_limit_is_rotated_and_nginx_writes_a_new_one(
    triton_cluster, make_user, tmp_path, settings
):
    settings.SWITCHYARD_ROUTER_LOG_MAX_BYTES = 4000
    rita = make_user("rita", role="release-managers")
    cluster = _nginx_cluster(rita, "rotating", tmp_path / "router")
    register_nodes(cluster, triton_cluster.nodes, actor=rita)
    router = router_for(cluster)
    router.apply(router_state(cluster, []))
    port = int(cluster.router["listen"].rsplit(":", 1)[1])
    logs = tmp_path / "router" / "logs"
    try:
        assert _live(port) == 200
        assert router_logs_rotate() == 0  # under the limit: nothing moves
        _requests(port, 40, "/v2/health/ready?first")  # each line ~400 bytes
        before = (logs / "access.log").read_text()
        assert len(before) > 4000
        assert router_logs_rotate() >= 1
        assert (logs / "access.log.1").read_text().startswith(before)
        # nginx writes a new access.log once its workers reopened their logs (a request
        # a worker served before it did goes to the old one, now .1).

        def reopened() -> bool:
            _requests(port, 1, "/v2/health/ready?after")
            return "?after" in (logs / "access.log").read_text()

        wait_for(reopened, timeout_s=10, what="a request logged in the new access.log")
        lines = (logs / "access.log").read_text().splitlines()
        assert lines and all("?after" in line for line in lines), lines
        # The next rotation drops the first one: one old copy is kept.
        _requests(port, 40, "/v2/health/ready?second")
        assert router_logs_rotate() >= 1
        kept = (logs / "access.log.1").read_text()
        assert "?second" in kept and "?first" not in kept
        assert sorted(p.name for p in logs.glob("access.log*")) == ["access.log", "access.log.1"]
    finally:
        router.stop()
