"""`manage.py run_router` (what `make demo` runs) against a real nginx and Triton node."""

import http.client
import subprocess
import sys
import time

import pytest

from deployments.services import cluster_create, node_create
from integrations.triton.local import free_ports
from tests.conftest import ROOT, child_environment, stop_process, wait_for

pytestmark = [pytest.mark.triton]


def _get(port: int, path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


@pytest.mark.django_db(transaction=True)
def test_run_router_waits_for_nodes_registered_after_their_cluster(
    tmp_path, make_user, triton_cluster
):
    """`make demo` registers the cluster, then its nodes: a router started in between used to
    render an empty upstream, which nginx refuses, and the whole demo stopped."""
    rita = make_user("rita", role="release-managers")
    (port,) = free_ports(1)
    router = {"driver": "nginx", "listen": f"127.0.0.1:{port}", "prefix_dir": str(tmp_path / "n")}
    cluster = cluster_create(actor=rita, name="late", environment="staging", router=router)
    log = tmp_path / "router.log"
    args = [sys.executable, "manage.py", "run_router", "--cluster", "late", "--wait", "60"]
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            args, cwd=ROOT, env=child_environment(), stdout=out, stderr=subprocess.STDOUT
        )
    try:
        time.sleep(2.5)  # it polls every second: it has seen the cluster without nodes
        assert proc.poll() is None, log.read_text()
        node = triton_cluster.nodes[0]
        node_create(
            cluster=cluster, actor=rita, name="n1", http_url=node.http_url, grpc_url=node.grpc_url
        )
        wait_for(lambda: b"listening on" in log.read_bytes(), timeout_s=30, what="router")
        assert _get(port, "/v2/health/live")[0] == 200  # through nginx to the node
    finally:
        stop_process(proc)
    assert "router stopped" in log.read_text()
