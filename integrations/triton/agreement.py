"""Whether two answers of Triton's HTTP/JSON protocol agree, output by output (pure).

A shadow's comparer sends one client's request body to the baseline and to the candidate
and asks this module whether their answers agree: exactly for integers, booleans and
strings (BYTES), within a relative and an absolute tolerance for floats (each element:
|a - b| <= atol + rtol * |b|, b the baseline's, as numpy.isclose). An output missing from
one answer, or of another shape or datatype, disagrees.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

FLOATS = ("FP16", "BF16", "FP32", "FP64")


@dataclass(frozen=True)
class Tolerance:
    rtol: float = 1e-5
    atol: float = 1e-6


@dataclass(frozen=True)
class OutputAgreement:
    name: str
    agrees: bool
    why: str = ""  # for a disagreement: what differs, short


def outputs_of(answer: dict) -> dict[str, dict]:
    """{output name: output} of a JSON inference answer ({} for anything else)."""
    found = answer.get("outputs") if isinstance(answer, dict) else None
    if not isinstance(found, list):
        return {}
    return {o["name"]: o for o in found if isinstance(o, dict) and isinstance(o.get("name"), str)}


def compare_answers(
    baseline: dict, candidate: dict, tolerances: dict[str, Tolerance], default: Tolerance
) -> list[OutputAgreement]:
    """Each of the baseline's outputs (and any the candidate adds), agreeing or not."""
    ours, theirs = outputs_of(baseline), outputs_of(candidate)
    out = []
    for name in sorted(set(ours) | set(theirs)):
        if name not in ours or name not in theirs:
            side = "baseline" if name not in ours else "candidate"
            out.append(OutputAgreement(name, False, f"missing from the {side}'s answer"))
            continue
        out.append(_compare_output(name, ours[name], theirs[name], tolerances.get(name, default)))
    return out


def _compare_output(name: str, base: dict, cand: dict, tol: Tolerance) -> OutputAgreement:
    if base.get("datatype") != cand.get("datatype") or base.get("shape") != cand.get("shape"):
        why = "{}{} vs {}{}".format(
            base.get("datatype"), base.get("shape"), cand.get("datatype"), cand.get("shape")
        )
        return OutputAgreement(name, False, why)
    a, b = _flat(base.get("data")), _flat(cand.get("data"))
    if len(a) != len(b):
        return OutputAgreement(name, False, f"{len(a)} vs {len(b)} values")
    floats = base.get("datatype") in FLOATS
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        if not (_close(x, y, tol) if floats else x == y):
            return OutputAgreement(name, False, f"[{i}] {_short(x)} vs {_short(y)}")
    return OutputAgreement(name, True)


def _close(baseline, candidate, tol: Tolerance) -> bool:
    try:
        a, b = float(baseline), float(candidate)
    except (TypeError, ValueError):
        return False
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(b - a) <= tol.atol + tol.rtol * abs(a)


def _flat(data) -> list:
    if not isinstance(data, list):
        return [data]
    out = []
    for item in data:
        out.extend(_flat(item) if isinstance(item, list) else [item])
    return out


def _short(value) -> str:
    text = f"{value:.6g}" if isinstance(value, float) else repr(value)
    return text[:40]
