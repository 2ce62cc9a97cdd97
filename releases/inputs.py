"""A release's settings as submitted and as stored: steps, gates, intervals, the sticky
header and the analysis knobs, typed with their ranges. Plain Python: the API, the
service that records a release and the tick that reads it all parse through here, so a
stored value that fails (written before these checks) stops only its own release's tick.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

from integrations.routers.base import RouterError, check_header_name

MAX_STEPS = 20
STEP_INTERVAL_S = (1.0, 3600.0)
SHADOW_S = (0.0, 24 * 3600.0)
SHADOW_SHARE = (0.0, 100.0)
PROGRESS_DEADLINE_S = (10.0, 7 * 24 * 3600.0)


class ReleaseInputError(ValueError):
    """An unusable release setting; `field` names it as the API does (`analysis.interval_s`)."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.message, self.field = message, field

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


@dataclass(frozen=True)
class AnalysisSettings:
    """The analysis knobs; None for interval_s means "the step interval"."""

    interval_s: float | None = None
    min_requests: int = 50
    max_failed_checks: int = 2
    latency_tolerance: float = 1.3
    # Latency slack when the judge does not decide and no per-request latencies exist (with
    # them, the baseline's measured noise is the slack: releases/tick.py `_verdict`).
    latency_margin_ms: float = 1.0
    # The fast guard rolls back as soon as a one-sided bound (z 1.645: 95 %) on the
    # candidate's error rate over all its requests so far exceeds what it is allowed: 1 - the
    # SLA's min_success_rate (fast_guard_error_floor when the SLA sets none) or a worse
    # baseline's rate plus 0.5 points; never on fewer requests or errors than the minimums.
    fast_guard_min_requests: int = 10
    fast_guard_min_errors: int = 2
    fast_guard_error_floor: float = 0.05
    fast_guard_z: float = 1.645
    # A node out of service while the candidate takes traffic: "hold" the weight until every
    # node serves it again (bounded by the progress deadline), or "rollback" at once.
    on_node_loss: str = "hold"
    # Intervals with too few requests to judge: after this many at one step, the release
    # "pause"s and says why (a human resumes, promotes or rolls back) or "rollback"s.
    max_inconclusive_checks: int = 10
    on_inconclusive: str = "pause"
    # At the start: the largest share of the model's Triton requests that may bypass the
    # router's HTTP split (gRPC, direct node calls, versioned URLs; releases/unrouted.py)
    # before the release is refused unless confirmed (`confirm_unrouted`).
    max_unrouted_share: float = 0.05
    # The statistical judge (Mann-Whitney U on per-request latencies from the router's log)
    # decides the latency-vs-baseline checks: "auto" once each side has judge_min_samples
    # latencies, "on" whenever it has any, "off" never (tolerance and margin alone). 20, as
    # the p99 bootstrap's (releases/analysis.py P99_MIN_SAMPLES): below the judge, a 5 %
    # canary's avg over a few dozen requests is moved by one stalled request (measured: one
    # of 37 took 116 ms, avg 4.35 against 1.72 ms, Mann-Whitney p 0.55).
    latency_judge: str = "auto"
    judge_alpha: float = 0.01
    judge_min_samples: int = 20


# key -> the words it takes
ANALYSIS_CHOICES: dict[str, tuple[str, ...]] = {
    "on_node_loss": ("hold", "rollback"),
    "on_inconclusive": ("pause", "rollback"),
    "latency_judge": ("auto", "on", "off"),
}


def effective_analysis(data: Any, *, step_interval_s: float) -> dict:
    """Every analysis knob as the release will use it, defaults included (the interval
    resolved to the step interval when not set apart): what a release stores at its start,
    so a later change of a default never changes a running release."""
    settings = asdict(parse_analysis(data))
    if settings["interval_s"] is None:
        settings["interval_s"] = float(step_interval_s)
    return settings


# key -> (type, lowest, highest)
ANALYSIS_RANGES: dict[str, tuple[type, float, float]] = {
    "interval_s": (float, 1.0, 3600.0),
    "min_requests": (int, 1, 1_000_000),
    "max_failed_checks": (int, 1, 100),
    "latency_tolerance": (float, 1.0, 100.0),
    "latency_margin_ms": (float, 0.0, 60_000.0),
    "fast_guard_min_requests": (int, 1, 1_000_000),
    "fast_guard_min_errors": (int, 1, 1_000_000),
    "fast_guard_error_floor": (float, 0.0, 1.0),
    "fast_guard_z": (float, 0.0, 10.0),
    "max_inconclusive_checks": (int, 1, 10_000),
    "max_unrouted_share": (float, 0.0, 1.0),
    "judge_alpha": (float, 1e-9, 0.5),
    "judge_min_samples": (int, 1, 1_000_000),
}


def number(value: Any, kind: type, low: float, high: float, field: str) -> float | int:
    """`value` as an int (kind int: a whole number) or a finite float within [low, high]."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ReleaseInputError("Must be a number.", field)
    if kind is int and not (isinstance(value, int) or float(value).is_integer()):
        raise ReleaseInputError("Must be a whole number.", field)
    if isinstance(value, float) and not math.isfinite(value) or not low <= value <= high:
        raise ReleaseInputError(f"Must be between {low:g} and {high:g}.", field)
    return int(value) if kind is int else float(value)


def parse_analysis(data: Any) -> AnalysisSettings:
    """AnalysisSettings from a submitted or stored dict; ReleaseInputError naming the key."""
    if data is None:
        return AnalysisSettings()
    if not isinstance(data, dict):
        raise ReleaseInputError("Must be an object.", "analysis")
    known = {f.name for f in fields(AnalysisSettings)}
    values = {}
    for key, value in data.items():
        if key not in known:
            raise ReleaseInputError("Unknown analysis setting.", f"analysis.{key}")
        if key in ANALYSIS_CHOICES:
            values[key] = choice(value, ANALYSIS_CHOICES[key], f"analysis.{key}")
        else:
            values[key] = number(value, *ANALYSIS_RANGES[key], f"analysis.{key}")
    return AnalysisSettings(**values)


def choice(value: Any, words: tuple[str, ...], field: str) -> str:
    """`value` when it is one of `words`; ReleaseInputError else."""
    if not isinstance(value, str) or value not in words:
        raise ReleaseInputError(f"Must be one of: {', '.join(words)}.", field)
    return value


def parse_steps(strategy: str, steps: Any, manual_gates: Any) -> list[dict]:
    """Stored steps [{"weight", "manual_gate"}]: whole percentages 1..100 ascending to 100
    (blue_green: exactly [100]); gates must be among the steps."""
    weights = [100] if strategy == "blue_green" else _weights(steps, "steps")  # b/g: one step
    if not weights or len(weights) > MAX_STEPS:
        raise ReleaseInputError(f"Give 1 to {MAX_STEPS} steps.", "steps")
    if weights != sorted(set(weights)) or weights[-1] != 100:
        raise ReleaseInputError("Steps must strictly increase and end at 100.", "steps")
    gates = _weights(manual_gates or [], "manual_gates")
    if not set(gates) <= set(weights):
        raise ReleaseInputError("Each gate must be one of the steps.", "manual_gates")
    return [{"weight": float(w), "manual_gate": w in gates} for w in weights]


def parse_stored_steps(steps: Any) -> list[tuple[float, bool]]:
    """(weight, manual_gate) of each stored step; ReleaseInputError for a junk row."""
    if not isinstance(steps, list) or not all(isinstance(s, dict) for s in steps):
        raise ReleaseInputError("Stored steps are not a list of objects.", "steps")
    weights = _weights([s.get("weight") for s in steps], "steps")
    return [(float(w), bool(s.get("manual_gate"))) for w, s in zip(weights, steps, strict=True)]


def _weights(values: Any, field: str) -> list[int]:
    if not isinstance(values, list | tuple) or len(values) > MAX_STEPS:
        raise ReleaseInputError(f"Must be a list of at most {MAX_STEPS} numbers.", field)
    return [number(v, int, 1, 100, field) for v in values]


def check_sticky_header(value: Any) -> str:
    """The sticky header name ('' = none), as nginx can use it; ReleaseInputError else."""
    if value in ("", None):
        return ""
    try:
        check_header_name(value)
    except RouterError as exc:
        raise ReleaseInputError(exc.message, "sticky_header") from None
    return value


def check_spec_numbers(step_interval_s: Any, progress_deadline_s: Any) -> None:
    """The step interval and progress deadline within their ranges."""
    number(step_interval_s, float, *STEP_INTERVAL_S, "step_interval_s")
    number(progress_deadline_s, float, *PROGRESS_DEADLINE_S, "progress_deadline_s")


def parse_shadow(
    shadow_s: Any, shadow_share: Any, progress_deadline_s: float
) -> tuple[float, float]:
    """(seconds, percent mirrored) of a shadow; (0, 0) for none. A shadow mirrors more than
    0 % and at most 100 % of the requests, and is shorter than the progress deadline (the
    phase must end before it)."""
    seconds = number(shadow_s or 0, float, *SHADOW_S, "shadow_s")
    if not seconds:
        return 0.0, 0.0
    share = number(
        100.0 if shadow_share is None else shadow_share, float, *SHADOW_SHARE, "shadow_share"
    )
    if share <= 0:
        raise ReleaseInputError("A shadow mirrors more than 0 % of the requests.", "shadow_share")
    if seconds >= progress_deadline_s:
        raise ReleaseInputError("A shadow must be shorter than progress_deadline_s.", "shadow_s")
    return seconds, share


@dataclass(frozen=True)
class AgreementSettings:
    """A shadow's answer comparer (releases/agreement.py)."""

    sample_share: float = 10.0  # percent of the mirrored copies whose body is compared
    max_per_s: float = 5.0  # comparisons a second at most: the extra load on the baseline
    rtol: float = 1e-5  # float outputs agree within atol + rtol * |baseline|
    atol: float = 1e-6
    outputs: dict = None  # {output name: {"rtol", "atol"}} where other than the above
    min_agreement: float | None = None  # the gate: share of inputs whose outputs all agree
    min_compared: int = 50  # comparisons before the gate can pass or fail

    def __post_init__(self) -> None:
        if self.outputs is None:
            object.__setattr__(self, "outputs", {})


AGREEMENT_RANGES = {
    "sample_share": (float, 0.01, 100.0),
    "max_per_s": (float, 0.1, 1000.0),
    "rtol": (float, 0.0, 1.0),
    "atol": (float, 0.0, 1e9),
    "min_agreement": (float, 0.0, 1.0),
    "min_compared": (int, 1, 1_000_000),
}
MAX_AGREEMENT_OUTPUTS = 64


def parse_agreement(data: Any) -> AgreementSettings | None:
    """The comparer's settings from a submitted or stored dict; None for none ({} or None);
    ReleaseInputError naming the key."""
    if not data:
        return None
    if not isinstance(data, dict):
        raise ReleaseInputError("Must be an object.", "agreement")
    values: dict[str, Any] = {}
    for key, value in data.items():
        if key == "outputs":
            values["outputs"] = _output_tolerances(value)
        elif key == "min_agreement" and value is None:
            values[key] = None
        elif key in AGREEMENT_RANGES:
            values[key] = number(value, *AGREEMENT_RANGES[key], f"agreement.{key}")
        else:
            raise ReleaseInputError("Unknown agreement setting.", f"agreement.{key}")
    return AgreementSettings(**values)


def _output_tolerances(value: Any) -> dict:
    if not isinstance(value, dict) or len(value) > MAX_AGREEMENT_OUTPUTS:
        raise ReleaseInputError(
            f"Must map at most {MAX_AGREEMENT_OUTPUTS} output names to tolerances.",
            "agreement.outputs",
        )
    out = {}
    for name, tol in value.items():
        field = f"agreement.outputs.{str(name)[:64]}"
        if not isinstance(name, str) or not name or len(name) > 128:
            raise ReleaseInputError("An output name is a non-empty string.", field)
        if not isinstance(tol, dict) or not set(tol) <= {"rtol", "atol"}:
            raise ReleaseInputError("Give {rtol, atol} for an output.", field)
        out[name] = {
            "rtol": number(tol.get("rtol", 1e-5), float, 0.0, 1.0, f"{field}.rtol"),
            "atol": number(tol.get("atol", 1e-6), float, 0.0, 1e9, f"{field}.atol"),
        }
    return out


def agreement_stored(data: Any) -> dict:
    """What a release stores of its agreement settings: every knob, defaults included ({}
    for none)."""
    parsed = parse_agreement(data)
    return {} if parsed is None else asdict(parsed)
