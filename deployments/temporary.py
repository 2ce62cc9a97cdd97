"""Names of the temporary models the control plane loads on real nodes, and what a served
model name is charged to (pure: no ORM, no I/O).

Smoke tests (deployments/smoke.py) load a new version as `<model>--smoke-<version>-<hex6>`;
benchmarks (benchmarks/services.py) as `<model>--bench-<run id>-v<version>-<hex6>`. Names of
benchmarks started before the version was part of the name (`<model>--bench-<run id>-<hex6>`)
stay readable: such a model serves the benchmarked version under its own number, so the
version Triton reports for it is the benchmark's version.

A release whose candidate has a config of its own serves the candidate beside the baseline
under a sibling name, `<model>--c<version>` (releases/configs.py): clients keep calling the
model's name and the router sends the candidate's share to the sibling. A sibling is not
temporary in cost terms: it serves clients, so its lines are the model's `serving` lines.

Every cost line is charged to the model and version a name belongs to, under its cost kind:
`serving` for the models clients call, `validation` for smoke tests, `benchmark` for
benchmarks (docs/COSTS.md).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

# The shapes of these names (the registry refuses them as model names).
from integrations.triton.names import BENCH, SIBLING, SMOKE

SERVING, VALIDATION, BENCHMARK = "serving", "validation", "benchmark"
COST_KINDS = (SERVING, VALIDATION, BENCHMARK)


def _suffix() -> str:
    return uuid.uuid4().hex[:6]


def smoke_name(model: str, version: int) -> str:
    """A fresh temporary name for the smoke test of `model` version `version`."""
    return f"{model}--smoke-{version}-{_suffix()}"


def bench_prefix(model: str, run_id: int) -> str:
    """What every temporary model of benchmark `run_id` is named with, old names included."""
    return f"{model}--bench-{run_id}-"


def bench_name(model: str, run_id: int, version: int) -> str:
    """A fresh temporary name for benchmark `run_id` of `model` version `version`."""
    return f"{bench_prefix(model, run_id)}v{version}-{_suffix()}"


def sibling_name(model: str, version: int) -> str:
    """The name a release serves `model` version `version` under beside the model's own
    name, with the version's own config (a config canary)."""
    return f"{model}--c{version}"


def sibling_of(name: str) -> tuple[str, str] | None:
    """(model, version) of a sibling name, None for any other name."""
    match = SIBLING.match(name) if "--c" in name else None
    return (match["model"], match["version"]) if match else None


def served_model(name: str, version: str) -> tuple[str, str]:
    """(model, version) a series Triton reports under `name` serves clients of: a sibling's
    are its model's (a config canary's candidate), any other name's its own."""
    return sibling_of(name) or (name, version)


@dataclass(frozen=True)
class Charged:
    """The model, version and cost kind a served (model name, version) is charged to."""

    model: str
    version: str
    cost_kind: str


def charged_to(name: str, version: str) -> Charged:
    """What the series `name` version `version` (as Triton reports them) is charged to: a
    temporary model's real model and version under its kind, a sibling's as `serving`, any
    other name as it is, as `serving`. A version in the name wins over the reported one."""
    if "--" in name:
        for pattern, kind in ((SMOKE, VALIDATION), (BENCH, BENCHMARK), (SIBLING, SERVING)):
            match = pattern.match(name)
            if match:
                return Charged(match["model"], match["version"] or version, kind)
    return Charged(name, version, SERVING)


def is_temporary(name: str) -> bool:
    """Whether `name` is a smoke test's or a benchmark's temporary model."""
    return charged_to(name, "").cost_kind != SERVING
