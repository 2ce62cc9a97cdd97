"""Counter change to websocket message at a 1 s scrape: p95 (goal at most 1.5 s), in one run.

Everything real and loopback: 2 Triton nodes with the risk_score example (version 2)
loaded, a throwaway PostgreSQL test database with the cluster and nodes registered, daphne
serving the ASGI app, `manage.py run_collector --interval 1` as its own process, and a
websocket client (single-use ticket) on /ws/clusters/<name>/. Each round waits until the version's
rate is back to 0 plus a random part of a scrape interval, sends ONE inference request
(t0 = just before sending) to one node, and takes the arrival of the first point with
request_rate > 0 for that version (any node's or the cluster aggregate). Prints every
round, then n, p50, p95 and max of arrival - t0 and the goal; a round with no such point
within 5 s is a miss and counts in the percentiles as slower than every other round.

Usage: .venv/bin/python bench/collector_latency.py [rounds]  (default 20; DATABASE_URL
names the server and database to derive the test database from; SWITCHYARD_TEST_REDIS_URL the Redis
db of the channel layer)
"""

import http.client
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["DJANGO_SETTINGS_MODULE"] = "controlplane.settings.test"
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/switchyard_bench")

CLUSTER, MODEL, VERSION = "latency-bench", "latency_risk", "2"
INTERVAL_S, GOAL_S = 1.0, 1.5
WAIT_S = 5.0  # a round that sees no point by then counts as a miss


def database_url() -> str:
    from django.conf import settings

    db = settings.DATABASES["default"]
    auth = db.get("USER") or ""
    if auth and db.get("PASSWORD"):
        auth += f":{db['PASSWORD']}"
    return f"postgres://{auth}{'@' if auth else ''}{db.get('HOST') or '127.0.0.1'}:" + (
        f"{db.get('PORT') or 5432}/{db['NAME']}"
    )


def spawn(args: list[str], log: Path) -> subprocess.Popen:
    """A Django child process on the test database, its output in `log`."""
    env = dict(os.environ, DATABASE_URL=database_url(), PYTHONUNBUFFERED="1")
    with open(log, "wb") as out:
        return subprocess.Popen(
            [sys.executable, *args], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
        )


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def wait_http(port: int, path: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"{proc.args} exited:\n{log.read_text(errors='replace')[-3000:]}")
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
        try:
            conn.request("GET", path)
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        finally:
            conn.close()
        time.sleep(0.2)
    sys.exit(f"{proc.args}: no answer after 30 s\n{log.read_text(errors='replace')[-3000:]}")


def setup_database(nodes):
    """Register the cluster and nodes; the fresh user whose websocket ticket the bench uses."""
    from django.contrib.auth import get_user_model

    from deployments.services import cluster_create, node_create

    user = get_user_model().objects.create(username="latency-bench", is_superuser=True)
    key = nodes[0].node_key.value
    cluster = cluster_create(actor=user, name=CLUSTER, environment="staging", api_key=key)
    for node in nodes:
        node_create(
            cluster=cluster,
            actor=user,
            name=node.name,
            http_url=node.http_url,
            grpc_url=node.grpc_url,
            metrics_url=node.metrics_url,
        )
    return user


def load_model(nodes) -> bytes:
    """Load the example on every node; one KServe JSON request body for it."""
    from demo.traffic import request_body
    from integrations.triton.client import TritonClient
    from tests.exampledata import example_config_json, example_files

    files = {k.removeprefix("file:"): v for k, v in example_files("risk_score", 2).items()}
    config = example_config_json("risk_score", name=MODEL, versions=[int(VERSION)])
    for node in nodes:
        with TritonClient(
            node.http_url, node.grpc_url, load_timeout_s=60, node_key=node.node_key
        ) as client:
            client.load(MODEL, config_json=config, files=files)
            reported = client.model_config(MODEL)
    return request_body(reported)


def is_ours(message: dict) -> bool:
    return (
        message.get("type") == "point"
        and message["model"] == MODEL
        and message["version"] == VERSION
    )


class Listener:
    """The websocket client's side: the latest rate seen, and waits for points."""

    def __init__(self, ws) -> None:
        self.ws, self.rate = ws, None

    def next_point(self, until: float) -> tuple[dict, float] | None:
        """Our next point and its arrival (monotonic), or None at `until`."""
        while (left := until - time.monotonic()) > 0:
            try:
                message = json.loads(self.ws.recv(timeout=left))
            except TimeoutError:
                return None
            if is_ours(message):
                if message["node"] == "":
                    self.rate = message["request_rate"]
                return message, time.monotonic()
        return None

    def quiet(self, jitter_s: float) -> None:
        """Until the aggregate rate reads 0, then jitter_s more (still reading)."""
        deadline = time.monotonic() + 10
        while self.rate != 0:
            if self.next_point(deadline) is None:
                sys.exit("the version's rate did not fall back to 0 within 10 s")
        end = time.monotonic() + jitter_s
        while self.next_point(end) is not None:
            pass


def infer(conn: http.client.HTTPConnection, body: bytes) -> None:
    conn.request(
        "POST",
        f"/v2/models/{MODEL}/versions/{VERSION}/infer",
        body=body,
        headers={"Content-Type": "application/json"},
    )
    response = conn.getresponse()
    if response.status != 200:
        sys.exit(f"inference failed: {response.status} {response.read()[:300]!r}")
    response.read()


def measure(listener: Listener, nodes, body: bytes, rounds: int) -> list[float | None]:
    """Each round's seconds from the request to its point, None for a round that saw no
    point within WAIT_S (a miss); every round is printed as it ends."""
    conns = [http.client.HTTPConnection(n.http_url.split("//")[-1], timeout=10) for n in nodes]
    results: list[float | None] = []
    try:
        for i in range(rounds):
            # A random phase against the scrape ticks, so the wait for the next tick is fair.
            listener.quiet(random.uniform(0.1, INTERVAL_S + 0.1))
            t0 = time.monotonic()
            infer(conns[i % len(conns)], body)
            latency = None
            while (got := listener.next_point(t0 + WAIT_S)) is not None:
                message, arrived = got
                if (message["request_rate"] or 0) > 0:
                    latency = arrived - t0
                    break
            results.append(latency)
            shown = (
                f"{latency:.3f} s" if latency is not None else f"MISSED (no point in {WAIT_S} s)"
            )
            print(f"round {i + 1}: {shown}", flush=True)
    finally:
        for conn in conns:
            conn.close()
    return results


def report(results: list[float | None]) -> None:
    """Percentiles over every round: a missed round counts as slower than any other."""
    missed = sum(r is None for r in results)
    ordered = sorted(r if r is not None else float("inf") for r in results)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    seen = [r for r in ordered if r != float("inf")]

    def shown(value: float) -> str:
        return f"{value:.3f} s" if value != float("inf") else "missed"

    print(
        f"counter change -> websocket point, scrape every {INTERVAL_S:.0f} s, "
        f"2 nodes: n {len(ordered)}, missed {missed}"
    )
    print(
        f"p50 {shown(statistics.median(ordered))}, p95 {shown(p95)}, max {shown(ordered[-1])} "
        f"(min {shown(seen[0]) if seen else 'missed'}); goal p95 <= {GOAL_S} s: "
        f"{'met' if p95 <= GOAL_S else 'MISSED'}"
    )


def main(rounds: int) -> None:
    import django

    django.setup()
    from django.db import connection
    from websockets.sync.client import connect

    from accounts.services import ws_ticket_create
    from bench.common import bench_node_key
    from integrations.triton.local import free_ports, start_cluster

    test_db = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        with tempfile.TemporaryDirectory(prefix="latency-bench-") as tmp, ExitStack() as stack:
            work = Path(tmp)
            key = bench_node_key()
            fleet = stack.enter_context(
                start_cluster(2, work, metrics_interval_ms=1000, node_key=key)
            )
            body = load_model(fleet.nodes)
            user = setup_database(fleet.nodes)
            connection.close()  # the children use the database; this process is done with it
            (port,) = free_ports(1)
            app = "controlplane.asgi:application"
            daphne = spawn(["-m", "daphne", "-b", "127.0.0.1", "-p", str(port), app], work / "d")
            stack.callback(stop, daphne)
            wait_http(port, "/login/", daphne, work / "d")
            collector = spawn(
                ["manage.py", "run_collector", "--interval", str(INTERVAL_S)], work / "c"
            )
            stack.callback(stop, collector)
            ticket, _ = ws_ticket_create(user=user, token=None)
            url = f"ws://127.0.0.1:{port}/ws/clusters/{CLUSTER}/?ticket={ticket}"
            ws = stack.enter_context(connect(url, origin=f"http://127.0.0.1:{port}"))
            if json.loads(ws.recv(timeout=10))["type"] != "hello":
                sys.exit("no hello from the websocket")
            listener = Listener(ws)
            if listener.next_point(time.monotonic() + 15) is None:
                sys.exit(f"no point within 15 s; collector log:\n{(work / 'c').read_text()}")
            report(measure(listener, fleet.nodes, body, rounds))
    finally:
        connection.close()
        connection.creation.destroy_test_db(test_db, verbosity=0)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
