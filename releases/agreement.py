"""A shadow's answer agreement: do baseline and candidate answer the same inputs alike?

While a release mirrors requests to its candidate (SHADOWING), the router also writes the
body of a sample of the copies to its samples log (integrations/routers/nginx.py,
`ModelRoute.sample`). Each tick, `compare_step` reads the new samples and, off the clients'
path and at most `max_per_s` a second (the comparer's extra load on the baseline, shown on
the cockpit), sends each body to the baseline and to the candidate on a node, and records
per output whether they agree (integrations/triton/agreement.py: exact for integers and
strings, `rtol`/`atol` for floats, per output where set). The counts, and a few examples
of disagreeing inputs, are kept on the release (`agreement_state`). With `min_agreement`
set, a shadow's interval fails once the inputs whose every output agreed are a smaller
share than that (after `min_compared` comparisons; before, it cannot pass).

The comparer's requests go straight to a node and are counted as the control plane's own
(deployments/own_traffic.py, origin `compare`), so telemetry and the gates leave them out.
Bodies that are not JSON (Triton's binary tensor extension) or too big for the router to
keep in memory are counted as skipped, never compared.
"""

from __future__ import annotations

import http.client
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlsplit

from deployments import own_traffic
from deployments.validation import node_urls_check
from integrations.triton.agreement import Tolerance, compare_answers
from releases.inputs import AgreementSettings, parse_agreement

log = logging.getLogger(__name__)

MAX_PER_TICK = 50  # comparisons in one tick, whatever the rate allows
EXAMPLES = 5  # disagreeing inputs kept for the cockpit
EXAMPLE_CHARS = 300
TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Sample:
    model: str
    version: int
    body: str


def parse_sample(line: str) -> Sample | None:
    """One samples-log line, or None for a foreign or truncated one."""
    try:
        raw = json.loads(line)
        return Sample(str(raw["model"]), int(raw["version"]), str(raw.get("body") or ""))
    except (ValueError, KeyError, TypeError):
        return None


def _read_new(path: Path | None, state: dict) -> list[str]:
    """Lines appended to the samples log since `state["offset"]` (from the start after a
    rotation or a new router); moves the offset."""
    if path is None or not path.exists():
        return []
    size = path.stat().st_size
    offset = int(state.get("offset") or 0)
    if size < offset:
        offset = 0
    with path.open("rb") as handle:
        handle.seek(offset)
        data = handle.read(min(size - offset, 4 * 1024 * 1024))
    whole = data.rfind(b"\n") + 1  # a line still being written waits for the next tick
    state["offset"] = offset + whole
    return data[:whole].decode("utf-8", errors="replace").splitlines()


def _infer(node, name: str, version: int, body: bytes) -> tuple[int, dict]:
    """POST the body to one version on one node: (HTTP status, the JSON answer or {})."""
    url = urlsplit(node.http_url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=TIMEOUT_S)
    try:
        path = f"/v2/models/{quote(name, safe='')}/versions/{version}/infer"
        conn.request("POST", path, body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        data = response.read()
    finally:
        conn.close()
    try:
        return response.status, json.loads(data)
    except ValueError:
        return response.status, {}


def _sent(node, name: str, version: int, body: bytes) -> tuple[int, dict]:
    """`_infer`, counted as the control plane's own request (a failure when not 200)."""
    with own_traffic.counted(node, name, version, own_traffic.COMPARE):
        status, answer = _infer(node, name, version, body)
        if status != 200:
            raise _Refused(status, answer)
    return status, answer


class _Refused(Exception):
    def __init__(self, status: int, answer: dict) -> None:
        super().__init__(f"HTTP {status}: {str(answer.get('error', ''))[:200]}")
        self.status, self.answer = status, answer


def compare_one(release, node, knobs: AgreementSettings, body_text: str) -> dict:
    """One input: {"result": "agree"|"disagree"|"skipped", "why", "outputs": {name: bool}}."""
    try:
        json.loads(body_text)
    except ValueError:
        return {"result": "skipped", "why": "not a JSON body"}
    body = body_text.encode()
    model, target = release.model.name, release.candidate_name or release.model.name
    try:
        _, base = _sent(node, model, release.baseline.version, body)
    except (_Refused, OSError, http.client.HTTPException) as exc:
        return {"result": "skipped", "why": f"baseline: {exc}"}
    try:
        _, cand = _sent(node, target, release.candidate.version, body)
    except _Refused as exc:
        return {"result": "disagree", "why": f"candidate answered {exc}", "outputs": {}}
    except (OSError, http.client.HTTPException) as exc:
        return {"result": "skipped", "why": f"candidate: {exc}"}
    tolerances = {k: Tolerance(**v) for k, v in knobs.outputs.items()}
    found = compare_answers(base, cand, tolerances, Tolerance(knobs.rtol, knobs.atol))
    outputs = {o.name: o.agrees for o in found}
    bad = [f"{o.name}: {o.why}" for o in found if not o.agrees]
    return {"result": "disagree" if bad else "agree", "why": "; ".join(bad), "outputs": outputs}


def compare_step(release, log_path: Path | None, now: float | None = None) -> None:
    """Compare the samples logged since the last tick (at most the rate allows) and add
    them to `release.agreement_state`; nothing without an agreement setting or a mirror."""
    knobs = parse_agreement(release.agreement)
    if knobs is None or not release.router_mirror:
        return
    now = time.time() if now is None else now
    state = {**_empty(), **(release.agreement_state or {})}
    mine = [
        s
        for s in map(parse_sample, _read_new(log_path, state))
        if s and s.model == release.model.name and s.version == release.candidate.version
    ]
    since = float(state.get("at") or now - 1.0)
    allowed = max(0, min(MAX_PER_TICK, int(knobs.max_per_s * max(0.0, now - since) + 0.5)))
    take = mine[-allowed:] if allowed else []
    state["over_rate"] += len(mine) - len(take)
    nodes = [n for n in release.cluster.nodes.all() if not _unusable(n)]
    for i, sample in enumerate(take if nodes else []):
        _count(state, sample.body, compare_one(release, nodes[i % len(nodes)], knobs, sample.body))
    if take or mine or not state.get("at"):
        state["at"] = now
    release.agreement_state = state


def _unusable(node) -> bool:
    return bool(node_urls_check(http=node.http_url, grpc=node.grpc_url, metrics=node.metrics_url))


def _empty() -> dict:
    return {
        "offset": 0, "at": None, "compared": 0, "agreed": 0, "skipped": 0, "over_rate": 0,
        "baseline_requests": 0, "outputs": {}, "examples": [],
    }  # fmt: skip


def _count(state: dict, body: str, result: dict) -> None:
    if result["result"] == "skipped":
        state["skipped"] += 1
        state["last_skip"] = result["why"][:200]
        return
    state["baseline_requests"] += 1
    state["compared"] += 1
    state["agreed"] += result["result"] == "agree"
    for name, agrees in result.get("outputs", {}).items():
        seen = state["outputs"].setdefault(name, [0, 0])
        seen[0], seen[1] = seen[0] + 1, seen[1] + bool(agrees)
    if result["result"] == "disagree" and len(state["examples"]) < EXAMPLES:
        state["examples"].append({"input": body[:EXAMPLE_CHARS], "why": result["why"][:300]})


def agreement_verdict(release) -> tuple[str, str] | None:
    """The agreement gate on a shadow's interval: ("fail" | "inconclusive", why), or None
    when it lets the interval's own verdict stand (no gate, or enough agreement)."""
    knobs = parse_agreement(release.agreement)
    if knobs is None or knobs.min_agreement is None:
        return None
    state = release.agreement_state or {}
    compared, agreed = int(state.get("compared") or 0), int(state.get("agreed") or 0)
    if compared and agreed / compared < knobs.min_agreement and compared >= knobs.min_compared:
        share = f"{agreed / compared:.1%} of {compared} compared inputs"
        return "fail", f"answers agree on {share} < {knobs.min_agreement:.1%}"
    if compared < knobs.min_compared:
        return "inconclusive", f"answers compared on {compared} of {knobs.min_compared} inputs"
    return None
