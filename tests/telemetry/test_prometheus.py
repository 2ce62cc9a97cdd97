"""Prometheus source mode: query building and assembly on the API's documented answer
shape, and the same rates as direct scraping against a real Prometheus and real nodes."""

import asyncio
import http.client
import json
import shutil
import subprocess
import threading
import time
import uuid
from urllib.parse import urlsplit

import pytest

from integrations.triton.local import free_ports
from telemetry.collector import Collector, ScrapeSource, Target
from telemetry.prometheus import PrometheusSource, assemble, build_queries, parse_vector
from telemetry.selectors import PrometheusCluster
from tests.conftest import in_thread, stop_process, wait_for
from tests.telemetry.live import load_example, streaming, traffic, unload


def answer(*rows: tuple[dict, str]) -> str:
    """A /api/v1/query answer as Prometheus documents it (instant vector)."""
    result = [{"metric": m, "value": [1700000000.123, v]} for m, v in rows]
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}})


def test_queries_select_the_cluster_instances_and_rate_over_a_few_intervals():
    queries = build_queries(["127.0.0.1:8002", "127.0.0.1:9002"], interval_s=2)
    success = queries["success"]
    assert success == (
        "sum by (instance, model, version) (rate(nv_inference_request_success"
        '{instance=~"127\\\\.0\\\\.0\\\\.1:8002|127\\\\.0\\\\.0\\\\.1:9002"}[6s]))'
    )
    assert 'quantile="0.99"' in queries["p99"] and queries["up"].startswith("up{")
    assert queries["output_tokens"].startswith(
        "sum by (instance, model, version) (rate(vllm:generation_tokens_total{instance=~"
    )
    assert "reason" in queries["failure"]


def test_assemble_gives_the_collector_numbers_and_marks_down_nodes_stale():
    a, b = "127.0.0.1:8002", "127.0.0.1:9002"
    s = {"instance": a, "model": "risk", "version": "3"}
    results = {name: [] for name in build_queries([a, b], 2)}
    results.update(
        success=parse_vector(answer((s, "8"))),
        failure=parse_vector(
            answer(({**s, "reason": "BACKEND"}, "2"), ({**s, "reason": "OTHER"}, "0"))
        ),
        request_us=parse_vector(answer((s, "40000"))),
        queue_us=parse_vector(answer((s, "800"))),
        p99=parse_vector(answer((s, "9500"))),
        pending=parse_vector(answer((s, "1"))),
        output_tokens=parse_vector(answer((s, "55"))),
        cpu=parse_vector(answer(({"instance": a}, "0.25"))),
        up=parse_vector(answer(({"instance": a}, "1"), ({"instance": b}, "0"))),
    )
    first, second = assemble("prod", {a: "n1", b: "n2"}, results, dt_s=2.0)
    series = first.stats.models[0]
    assert (series.model, series.version, series.request_rate) == ("risk", "3", 10.0)
    assert series.success_rate_pct == 80.0 and series.avg_request_ms == 5.0
    assert series.avg_queue_ms == 0.1 and series.p99_ms == 9.5 and series.pending == 1
    assert series.failures == {"BACKEND": 4.0} and first.stats.cpu_utilization == 0.25
    assert first.deltas[("risk", "3")].requests == 20.0
    assert series.output_tokens_rate == 55.0 and series.output_tokens_per_request == 5.5
    assert first.deltas[("risk", "3")].output_tokens == 110.0
    assert second.stats is None and second.node == "n2"  # up == 0: stale


def test_prometheus_error_answer_is_refused():
    with pytest.raises(ValueError, match="bad_data"):
        parse_vector(json.dumps({"status": "error", "errorType": "bad_data", "error": "parse"}))


@pytest.fixture
def prometheus(triton_cluster, tmp_path):
    """A real Prometheus scraping the session's Triton nodes every second."""
    binary = shutil.which("prometheus") or "/usr/bin/prometheus"
    if not shutil.which(binary):
        pytest.skip("Debian's prometheus is not installed (scripts/setup_system.sh installs it)")
    (port,) = free_ports(1)
    targets = [urlsplit(n.metrics_url).netloc for n in triton_cluster.nodes]
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n  - job_name: triton\n    static_configs:\n"
        f"      - targets: {json.dumps(targets)}\n"
    )
    log = tmp_path / "prometheus.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp_path / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
        try:
            conn.request("GET", "/-/ready")
            return conn.getresponse().status == 200
        except OSError:
            return False
        finally:
            conn.close()

    try:
        wait_for(ready, timeout_s=30, what="prometheus", proc=proc, log=log)
        yield url
    finally:
        stop_process(proc)


@pytest.mark.triton
def test_prometheus_mode_gives_the_same_rates_as_direct_scraping(triton_cluster, prometheus):
    """Requests a second of a model and output tokens a second of a streaming one."""
    nodes = triton_cluster.nodes
    name, streamed = f"prom_{uuid.uuid4().hex[:8]}", f"promtok_{uuid.uuid4().hex[:8]}"
    config = load_example(nodes, example="risk_score", name=name, versions=[1])
    load_example(nodes, example="token_stream", name=streamed, versions=[1])
    instances = tuple((urlsplit(n.metrics_url).netloc, n.name) for n in nodes)
    direct = Collector([ScrapeSource([Target("c", n.name, n.metrics_url) for n in nodes])])
    # Triton refreshes its counters once a second, so any rate over a window is off by up to
    # one refresh at each end (seen: 36.4 vs 39.9 req/s over 12 s). A 30 s window
    # (interval 10 s x 3) keeps that quantisation well inside the 5 % compared here.
    via_prom = Collector([PrometheusSource(PrometheusCluster("c", prometheus, instances), 10.0)])

    def point(payloads: dict, model: str) -> dict:
        (found,) = [
            p
            for p in payloads["cluster-c"]
            if p["type"] == "point" and p["node"] == "" and p["model"] == model
        ]
        return found

    async def measure() -> tuple[dict, dict]:
        start = time.time()
        await direct.tick(start)
        await asyncio.sleep(30.0)  # the same 30 s window as rate(...[30s]) below
        now = time.time()
        scraped = await direct.tick(now)
        await asyncio.sleep(1.5)  # let Prometheus scrape the last second
        return scraped, await via_prom.tick(now)

    stop = threading.Event()
    client = threading.Thread(target=streaming, args=(nodes[0], streamed, stop))
    try:
        with traffic(nodes, name, config, version="1", rps=40):
            client.start()
            time.sleep(4)  # Prometheus has the series before the window starts
            scraped, queried = in_thread(asyncio.run, measure())
        rate = point(scraped, name)["request_rate"]
        assert rate > 20
        assert point(queried, name)["request_rate"] == pytest.approx(rate, rel=0.05)
        tokens = point(scraped, streamed)["tokens_per_s"]
        assert tokens > 10  # tens of tokens a second, one stream at a time
        assert point(queried, streamed)["tokens_per_s"] == pytest.approx(tokens, rel=0.1)
        assert point(queried, name)["tokens_per_s"] is None  # a model that counts none
    finally:
        stop.set()
        client.join(30)
        unload(nodes, name)
        unload(nodes, streamed)
