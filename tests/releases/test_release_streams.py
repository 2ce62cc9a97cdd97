"""Releases of a streaming model end to end: the example decoupled `token_stream` on real
Triton nodes behind a real nginx router, streaming clients reading `generate_stream` through
it, ticks on the session's lane workers. A stream's time to first token is what the router
saw (its upstream header time), compared per stream between candidate and baseline."""

import http.client
import io
import json
import threading
import time

import pytest

from deployments.services import deployment_create
from models_registry.services import model_create, model_version_derive, model_version_register
from releases import routing
from releases.services import release_create
from tests.deploying import pushed
from tests.registry.archives import example_entries, tar_gz
from tests.releases.test_release_flow import RESETS, _unload
from tests.releases.test_release_flow import release_world as release_world  # noqa: F401
from tests.releases.test_release_flow import ticking as ticking  # noqa: F401

pytestmark = [pytest.mark.triton, pytest.mark.django_db(transaction=True)]

TOKENS = 11
SLA = {"p99_latency_ms": 2000, "min_success_rate": 99.0, "p95_first_token_ms": 500}


class Streams:
    """Keep-alive clients each reading one stream after another through the router; a
    stream is ok when it answered 200 with every token, else failed. A connection the router
    closed at a reload before any byte came back (as for tests/releases/test_release_flow.py
    Traffic) is sent once more on a new connection and counted in `retries`. `samples`
    holds each stream's (end time, ok, version or what failed it)."""

    def __init__(self, port: int, model: str, clients: int = 6, tokens: int = TOKENS):
        self.port, self.model, self.tokens, self.clients = port, model, tokens, clients
        self.ok = self.failed = self.retries = 0
        self.samples: list[tuple[float, bool, str]] = []
        self.versions: dict[str, int] = {}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, args=(i,)) for i in range(clients)]

    def summary(self) -> str:
        return f"ok={self.ok} failed={self.failed} versions={self.versions} {self.errors[:2]}"

    def __enter__(self):
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        for thread in self._threads:
            thread.join(15)

    def more(self, n: int, timeout_s: float = 60.0) -> None:
        target, deadline = self.ok + n, time.monotonic() + timeout_s
        while self.ok < target:
            assert time.monotonic() < deadline, f"{n} more streams: {self.summary()}"
            time.sleep(0.1)

    def _one(self, conn, i: int) -> tuple[bool, str]:
        body = json.dumps({"PROMPT": f"ticket {i % 7}", "MAX_TOKENS": self.tokens})
        conn.request("POST", f"/v2/models/{self.model}/generate_stream", body)
        response = conn.getresponse()
        data = response.read().decode()
        events = [json.loads(e.removeprefix("data: ")) for e in data.split("\n\n") if e]
        tokens = [e for e in events if "TOKEN" in e]
        version = tokens[0].get("model_version", "") if tokens else ""
        return response.status == 200 and len(tokens) == self.tokens, version or data[:200]

    def _retried(self, conn, i: int) -> tuple[bool, str]:
        try:
            return self._one(conn, i)
        except (OSError, http.client.HTTPException, ValueError) as exc:
            return False, repr(exc)

    def _run(self, index: int) -> None:
        conn, i = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30), index
        while not self._stop.is_set():
            try:
                ok, seen = self._one(conn, i)
            except RESETS:
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                with self._lock:
                    self.retries += 1
                ok, seen = self._retried(conn, i)
            except (OSError, http.client.HTTPException, ValueError) as exc:
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                ok, seen = False, repr(exc)
            i += self.clients
            with self._lock:
                self.samples.append((time.time(), ok, seen))
                if ok:
                    self.ok += 1
                    self.versions[seen] = self.versions.get(seen, 0) + 1
                else:
                    self.failed += 1
                    self.errors.append(seen)
        conn.close()


def _register(model, user, version: int, faults: dict | None = None):
    """The example's `version` as a version of `model` (`faults` written to v4's
    faults.json)."""
    entries = example_entries("token_stream", version)
    if faults:
        written = json.dumps(faults).encode()
        entries = [(n, written if n.endswith("/faults.json") else b) for n, b in entries]
    name = f'name: "{model.name}"'.encode()
    config = entries[0][1].replace(b'name: "token_stream"', name)
    archive = io.BytesIO(tar_gz([("config.pbtxt", config), *entries[1:]]))
    return model_version_register(model=model, archive=archive, actor=user)


def _streaming_model(world, name: str, variant: int = 2, sla: dict = SLA):
    """token_stream v1 serving through the router under `name`, and the example's
    `variant` registered (2: a first token twice as slow; 3: tokens twice as slow after
    it): (model, v1, that version)."""
    model = model_create(name=name, team="fraud", actor=world["ada"], sla=sla)
    steady = _register(model, world["ada"], 1)
    pushed(deployment_create(cluster=world["cluster"], version=steady, actor=world["rita"]))
    routing.router_for(world["cluster"]).apply(routing.router_state(world["cluster"], []))
    return model, steady, _register(model, world["ada"], variant)


def _started(world, candidate, *, failed_checks: int):
    """A release of `candidate` in two steps of 3 s, judged with a 1.5x latency tolerance."""
    analysis = {"min_requests": 10, "max_failed_checks": failed_checks, "latency_tolerance": 1.5}
    return release_create(
        cluster=world["cluster"], candidate=candidate, actor=world["rita"], steps=[50, 100],
        step_interval_s=3, drain_s=0.5, progress_deadline_s=90, analysis=analysis,
    )  # fmt: skip


def _story(release) -> list:
    """What a failed phase assertion prints: the release's reasons, then each judged
    interval's step, weight, streams a side and verdict."""
    judged = [
        (e.data.get("step_index"), e.data.get("weight"),
         [e.data.get(r, {}).get("streams") for r in ("baseline", "candidate")],
         e.data.get("result"), e.data.get("reason"))
        for e in release.events.filter(kind="analysis").order_by("pk")
    ]  # fmt: skip
    return [release.reason, release.outcome_reason, *judged]


def test_a_candidate_whose_first_token_is_twice_as_slow_is_rolled_back_at_full_success(
    release_world, ticking, client
):
    world = release_world
    model, steady, slow = _streaming_model(world, "stream_slow")
    with Streams(world["port"], "stream_slow") as streams:
        streams.more(10)
        release = _started(world, slow, failed_checks=1)
        release = ticking.phase(release.pk, {"SUCCEEDED", "ROLLED_BACK", "FAILED"})
        streams.more(10)
    assert release.phase == "ROLLED_BACK", _story(release)
    assert "p95 first token" in release.outcome_reason, release.outcome_reason
    # Its streams all succeeded: only the first token's time gave it away.
    assert streams.failed == 0 and streams.versions.get("2", 0) > 0, streams.summary()
    reloads = release.events.filter(kind="effect", message__startswith="router:").count()
    # At most one retry per client and reload.
    assert streams.retries <= streams.clients * reloads, streams.summary()
    judged = [e.data for e in release.events.filter(kind="analysis")]
    checks = [c for d in judged for c in d.get("checks", []) if c.get("name") == "ttft_p95_ms"]
    assert checks and not checks[-1]["passed"], judged[-1]
    last = judged[-1]  # each version's figures, as the cockpit charts them
    assert last["candidate"]["first_token_p95_ms"] > 1.5 * last["baseline"]["first_token_p95_ms"]
    assert last["candidate"]["streams"] >= 20 and last["baseline"]["pace_p95_ms_per_kib"]
    # Token figures: the example's own count (11 tokens a stream) over the router's bytes
    # and timing; its tokens come every 10 ms after the first.
    for role in ("baseline", "candidate"):
        assert last[role]["tokens_per_stream"] == TOKENS, last[role]
        assert 9.0 <= last[role]["inter_token_p95_ms"] <= 40.0, last[role]
        assert "vllm:generation_tokens_total" in last[role]["tokens_source"]
    client.force_login(world["rita"])
    page = client.get(f"/releases/{release.pk}/").content.decode()
    assert 'data-testid="stream-charts"' in page and 'data-metric="first_token_p95_ms"' in page
    assert 'data-testid="token-charts"' in page and 'data-metric="tokens_per_s_p5"' in page
    _unload(world, model)


def test_an_equal_candidate_passes_the_first_token_check_and_is_promoted(release_world, ticking):
    """A/A: v1's files with a config parameter of their own (a config canary: served under
    its sibling name), judged on time to first token, time between tokens and tokens per
    second like any stream candidate, against an SLA it meets (~100 tokens/s, 10 ms)."""
    world = release_world
    sla = {**SLA, "p95_inter_token_ms": 60, "min_tokens_per_s": 20}
    model, steady, _ = _streaming_model(world, "stream_aa", sla=sla)
    patch = {"parameters": {"release_note": {"string_value": "a/a"}}}
    same = model_version_derive(source=steady, actor=world["ada"], config_patch=patch)
    with Streams(world["port"], "stream_aa") as streams:
        streams.more(10)
        release = _started(world, same, failed_checks=2)
        assert release.candidate_name == f"stream_aa--c{same.version}"
        release = ticking.phase(release.pk, {"SUCCEEDED", "ROLLED_BACK", "FAILED"})
        streams.more(10)
    assert release.phase == "SUCCEEDED", _story(release)
    assert release.sla["p95_first_token_ms"] == 500  # judged against it too (met)
    assert streams.failed == 0, streams.summary()
    judged = [e.data for e in release.events.filter(kind="analysis")]
    for name in ("ttft_p95_ms", "itl_p95_ms", "tokens_per_s_sla"):
        checks = [c for d in judged for c in d.get("checks", []) if c.get("name") == name]
        assert checks and all(c["passed"] for c in checks), (name, judged)
    _unload(world, model)


def test_a_candidate_below_the_slas_tokens_per_second_is_rolled_back(release_world, ticking):
    """The same A/A candidate against an SLA of 200 tokens/s, twice what the example
    streams: it fails whatever the baseline does (the SLA is absolute)."""
    world = release_world
    model, steady, _ = _streaming_model(world, "stream_tps", sla={**SLA, "min_tokens_per_s": 200})
    patch = {"parameters": {"release_note": {"string_value": "a/a"}}}
    same = model_version_derive(source=steady, actor=world["ada"], config_patch=patch)
    with Streams(world["port"], "stream_tps") as streams:
        streams.more(10)
        release = _started(world, same, failed_checks=1)
        release = ticking.phase(release.pk, {"SUCCEEDED", "ROLLED_BACK", "FAILED"})
    assert release.phase == "ROLLED_BACK", _story(release)
    assert "p5 tokens/s" in release.outcome_reason and "< SLA 200" in release.outcome_reason
    assert streams.failed == 0, streams.summary()
    _unload(world, model)


def test_a_candidate_whose_tokens_come_twice_as_slowly_is_rolled_back(release_world, ticking):
    world = release_world
    model, steady, slow = _streaming_model(world, "stream_pace", variant=3)
    with Streams(world["port"], "stream_pace") as streams:
        streams.more(10)
        release = _started(world, slow, failed_checks=1)
        release = ticking.phase(release.pk, {"SUCCEEDED", "ROLLED_BACK", "FAILED"})
    assert release.phase == "ROLLED_BACK", _story(release)
    # Judged by the time between tokens: the example counts its tokens.
    assert "p95 inter-token" in release.outcome_reason, release.outcome_reason
    assert "p95 first token" not in release.outcome_reason  # its first token is on time
    assert streams.failed == 0 and streams.versions.get("2", 0) > 0, streams.summary()
    _unload(world, model)


def test_a_candidate_failing_streams_at_their_first_response_is_rolled_back(release_world, ticking):
    """v4 fails 30 % of its streams at their first response: Triton answers them 400
    through generate_stream, which the router counts as failed streams (the rule is
    integrations/routers/access_log.py `failed_stream`); Triton's own counters call every
    one a success."""
    world = release_world
    model, steady, _ = _streaming_model(world, "stream_fail")
    failing = _register(model, world["ada"], 4, faults={"failure_rate": 0.3})
    with Streams(world["port"], "stream_fail") as streams:
        streams.more(10)
        release = _started(world, failing, failed_checks=1)
        release = ticking.phase(release.pk, {"SUCCEEDED", "ROLLED_BACK", "FAILED"})
        streams.more(10)  # v1 alone again: every stream whole
    assert release.phase == "ROLLED_BACK", _story(release)
    assert "success" in release.outcome_reason or "guard" in release.outcome_reason, (
        release.outcome_reason
    )
    assert streams.failed > 0 and streams.versions.get("1", 0) > 0, streams.summary()
    assert all(e.startswith("400") or "error" in e for e in streams.errors), streams.errors[:3]
    _unload(world, model)
