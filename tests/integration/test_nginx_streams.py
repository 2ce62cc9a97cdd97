"""Streams through the router: the example decoupled model `token_stream` (v1 steady, v2 with
a first token twice as slow) on the session's two real Triton nodes behind a real nginx.

The router splits a model's `generate` and `generate_stream` by version like `infer`, and
passes a stream's server-sent events on as Triton sends them (nginx buffers nothing), so a
client reads its first token long before the stream ends. Measured numbers are printed
with a `MEASURED` prefix (run with -s to see them)."""

import http.client
import json
import statistics
import threading
import time
import uuid
from collections import Counter

import pytest
import tritonclient.grpc as grpcclient

from integrations.routers import ModelRoute, RouterState
from integrations.routers.access_log import (
    AccessLogTail,
    cut_streams,
    last_lines,
    parse_line,
    router_counts,
)
from integrations.routers.nginx import NginxRouter
from integrations.triton.local import free_ports
from releases.observe import RouterInterval
from tests.exampledata import example_config_json, example_files
from tests.nodes import example_on_every_node, grpc_key

pytestmark = pytest.mark.triton

TOKENS = 12
BODY = json.dumps({"PROMPT": "where does this ticket go", "MAX_TOKENS": TOKENS}).encode()


@pytest.fixture(scope="module")
def streams(triton_cluster):
    """token_stream v1 and v2 under a unique name on every node; unloaded afterwards."""
    name = f"stream_t{uuid.uuid4().hex[:6]}"
    with example_on_every_node(triton_cluster, "token_stream", name=name, versions=[1, 2]):
        yield name


@pytest.fixture
def router(tmp_path, triton_cluster):
    (port,) = free_ports(1)
    driver = NginxRouter(prefix_dir=tmp_path / "nginx", listen=f"127.0.0.1:{port}")
    try:
        yield driver, [node.http_url for node in triton_cluster.nodes]
    finally:
        driver.stop()


def read_stream(port: int, path: str) -> tuple[int, list[dict], float, float]:
    """POST a generate_stream: (status, the events' JSON, seconds to the first event,
    seconds to the end)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    started = time.perf_counter()
    conn.request("POST", path, BODY, {"Content-Type": "application/json"})
    response = conn.getresponse()
    events, first_at, buffer = [], None, b""
    while chunk := response.read1(65536):
        first_at = first_at or time.perf_counter()
        buffer += chunk
        while b"\n\n" in buffer:
            event, buffer = buffer.split(b"\n\n", 1)
            data = event.decode().removeprefix("data: ")
            events.append(json.loads(data))
    ended = time.perf_counter()
    conn.close()
    return response.status, events, (first_at or ended) - started, ended - started


def test_a_stream_through_the_router_is_split_by_version_and_not_buffered(router, streams):
    driver, upstreams = router
    driver.apply(RouterState(upstreams, [ModelRoute(streams, {1: 50.0, 2: 50.0})]))
    tail = AccessLogTail.from_end(driver.access_log_path)
    seen = Counter()
    firsts, totals, texts = [], [], set()
    for _ in range(20):
        status, events, first_s, total_s = read_stream(
            driver.port, f"/v2/models/{streams}/generate_stream"
        )
        assert status == 200 and len(events) == TOKENS, events[:2]
        seen[events[0]["model_version"]] += 1
        firsts.append(first_s)
        totals.append(total_s)
        texts.add(" ".join(e["TOKEN"] for e in events))
    assert set(seen) == {"1", "2"}, seen  # both versions took a share of the streams
    assert texts == {"is low and the ticket goes to billing the risk is low"}  # one prompt
    # Unbuffered: the first token reached the client well before the stream's end (its 11
    # other tokens come 10 ms apart after it).
    assert all(first < total - 0.05 for first, total in zip(firsts, totals, strict=True))
    print(
        f"MEASURED streams through the router: first event after {min(firsts) * 1000:.0f}-"
        f"{max(firsts) * 1000:.0f} ms, stream end after {min(totals) * 1000:.0f}-"
        f"{max(totals) * 1000:.0f} ms ({dict(seen)})"
    )
    lines: list[str] = []
    deadline = time.monotonic() + 10
    while len(lines) < 20 and time.monotonic() < deadline:
        lines += tail.read_lines()
        time.sleep(0.05)
    entries = [e for e in map(parse_line, lines) if e is not None]
    assert Counter(str(e.version) for e in entries) == seen
    assert all(e.model == streams and e.status == 200 for e in entries)
    assert all(e.uri.endswith(f"/versions/{e.version}/generate_stream") for e in entries)
    assert router_counts(lines).split == {streams: 20}  # the router's split, not unrouted
    # What the router saw of each stream's first token: Triton sends the response header
    # with the first event, so the upstream's header time is the time to first token.
    header_ms: dict[str, list[float]] = {"1": [], "2": []}
    for line in lines:
        raw = json.loads(line)
        header_ms[raw["version"]].append(float(raw["upstream_header_time"]) * 1000)
    print(f"MEASURED upstream header time by version (ms): {header_ms}")
    # v2 waits 80 ms before its first token, v1 40 ms (the models' own sleeps, not a race).
    assert statistics.median(header_ms["2"]) > statistics.median(header_ms["1"]) + 20
    assert min(header_ms["1"]) >= 35 and min(header_ms["2"]) >= 75


def test_a_pinned_model_answers_generate_from_the_pinned_version(router, streams):
    driver, upstreams = router
    driver.apply(RouterState(upstreams, [ModelRoute(streams, {1: 0.0, 2: 100.0})]))
    versions = Counter()
    for _ in range(6):
        status, events, _, _ = read_stream(driver.port, f"/v2/models/{streams}/generate_stream")
        assert status == 200
        versions.update(e["model_version"] for e in events)
    assert versions == Counter({"2": 6 * TOKENS})


def test_streams_cut_by_a_node_that_dies_are_logged_200_but_counted_as_cut(
    router, streams, triton_cluster
):
    """A node killed mid-stream: nginx logs its streams 200 (the header went out with the
    first event), and only its error log tells they were cut; `cut_streams` counts them per
    version. The node is started again and given the module's model back."""
    driver, upstreams = router
    driver.apply(RouterState(upstreams, [ModelRoute(streams, {1: 100.0, 2: 0.0})]))
    since = time.time()
    long_body = json.dumps({"PROMPT": "a long answer", "MAX_TOKENS": 200}).encode()  # ~2 s
    results: list = []

    def one() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", driver.port, timeout=30)
        try:
            conn.request("POST", f"/v2/models/{streams}/generate_stream", long_body)
            response = conn.getresponse()
            results.append((response.status, response.read().count(b"data: ")))
        except (OSError, http.client.HTTPException) as exc:
            results.append((0, repr(exc)))
        finally:
            conn.close()

    threads = [threading.Thread(target=one) for _ in range(6)]  # both nodes get some
    for thread in threads:
        thread.start()
    time.sleep(0.5)  # every stream under way
    victim = triton_cluster.nodes[1]
    triton_cluster.kill(victim)
    for thread in threads:
        thread.join(30)
    cut = [r for r in results if r[0] != 200 or r[1] != 200]
    assert cut, results  # the victim's streams ended early
    lines, _ = last_lines(driver.error_log_path, 1 << 20)
    counted = cut_streams(lines, streams, since)
    print(f"MEASURED streams cut by a killed node: {len(cut)} of 6 at the clients, {counted}")
    assert counted == {1: len(cut)}
    access = [e for e in map(parse_line, AccessLogTail(driver.access_log_path, 0).read_lines())]
    assert all(e.status == 200 for e in access if e and e.ts >= since)  # the access log: 200
    assert cut_streams(lines, streams, since + 3600) == {}  # lines before `since`: not counted
    # A release's interval reads them as the version's router errors (its gates and guard).
    seen = RouterInterval(driver.access_log_path, 0, since, streams).read()
    assert seen.cut == {1: len(cut)} and seen.errors.get(1, 0) == 0
    triton_cluster.restart(victim)  # same ports, empty: the module's model loaded again
    config = example_config_json("token_stream", name=streams, versions=[1, 2])
    files = {**example_files("token_stream", 1), **example_files("token_stream", 2)}
    client = grpcclient.InferenceServerClient(victim.grpc_url)
    try:
        client.load_model(streams, config=config, files=files, headers=grpc_key(victim))
    finally:
        client.close()
