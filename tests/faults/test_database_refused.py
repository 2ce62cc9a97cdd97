"""The collector rides through a PostgreSQL that refuses connections (restarting, or cut off
by the network): it keeps ticking, never exits, and reads its nodes again once the database
answers. The fault is a TCP gate in front of the real PostgreSQL, closed and opened."""

import subprocess
import sys
import time

import pytest
from django.conf import settings

from deployments.services import cluster_create, node_create
from telemetry import status
from telemetry.status import collector_status_read
from tests.conftest import ROOT, child_environment, database_url, stop_process, wait_for
from tests.faults.tcp_gate import TcpGate

pytestmark = pytest.mark.django_db(transaction=True)


def _errors_of(cluster: str, node: str) -> int:
    return collector_status_read().scrape_errors.get((cluster, node), 0)


def _forget_errors(cluster: str, node: str) -> None:
    import redis

    client = redis.Redis.from_url(settings.REDIS_URL)
    try:
        client.hdel(status.errors_key(), f"{cluster}{status.SEPARATOR}{node}")
    finally:
        client.close()


def test_the_collector_never_exits_on_a_refused_database_and_resumes(make_user, tmp_path):
    for node in ("n1", "late"):  # counts an earlier run left in this Redis database
        _forget_errors("gated", node)
    rita = make_user("rita", role="release-managers")
    cluster = cluster_create(actor=rita, name="gated", environment="staging", router={})
    node_create(  # nothing listens there: each scrape counts an error, which shows it is read
        cluster=cluster,
        actor=rita,
        name="n1",
        http_url="http://127.0.0.1:9",
        metrics_url="http://127.0.0.1:11/metrics",
    )
    port = int(settings.DATABASES["default"].get("PORT") or 5432)
    gate = TcpGate(port)  # closed: the collector's database refuses from the start
    url = database_url().replace(f":{port}/", f":{gate.port}/")
    env = child_environment(DATABASE_URL=url, SWITCHYARD_TELEMETRY_TARGETS_REFRESH_S="1")
    log = tmp_path / "collector.log"
    started = time.time()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "run_collector", "--interval", "0.5"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(
            lambda: (collector_status_read().last_tick_at or 0) > started + 2,
            timeout_s=60,
            what="the collector ticking without its database",
            proc=proc,
            log=log,
        )
        assert proc.poll() is None and _errors_of("gated", "n1") == 0  # no node read yet
        assert "nodes not re-read" in log.read_text()
        gate.open()
        wait_for(
            lambda: _errors_of("gated", "n1") > 0,  # it read the node and scraped it
            timeout_s=30,
            what="the collector reading its nodes again",
            proc=proc,
            log=log,
        )
        gate.close()  # refused again, mid-run
        ticked = collector_status_read().last_tick_at
        node_create(  # added while the collector cannot read it: scraped once it can
            cluster=cluster,
            actor=rita,
            name="late",
            http_url="http://127.0.0.1:12",
            metrics_url="http://127.0.0.1:13/metrics",
        )
        wait_for(
            lambda: (collector_status_read().last_tick_at or 0) > ticked + 3,
            timeout_s=30,
            what="the collector ticking on",
            proc=proc,
            log=log,
        )
        assert proc.poll() is None and _errors_of("gated", "late") == 0
        gate.open()
        wait_for(
            lambda: _errors_of("gated", "late") > 0,
            timeout_s=30,
            what="the collector reading the node added meanwhile",
            proc=proc,
            log=log,
        )
    finally:
        gate.close()
        stop_process(proc)
        _forget_errors("gated", "n1")
        _forget_errors("gated", "late")
    assert proc.returncode == 0, log.read_text()[-2000:]  # stopped by us, cleanly
