"""The models a version's config calls, pure: an ensemble's steps, a BLS model's calls.

An ensemble (`platform: "ensemble"`) runs nothing of its own: each request passes through
the models its `ensemble_scheduling.step` entries name, each at a pinned version
(`model_version` > 0) or at the newest one loaded (-1, or unset). Triton answers an
ensemble only while every step is loaded, and unloading a step makes it UNAVAILABLE.

A python model may call others from its code (business logic scripting: BLS), which no
config field says; it declares them in the config parameter `switchyard.calls`, a comma-
separated list of model names, each optionally pinned (`risk_score:2`). Its smoke test
loads them and records which ones its inference reached (deployments/smoke.py).

`config` is a stored version's `config_json` (protobuf JSON with the proto's field names;
int64 values may come as strings).
"""

from __future__ import annotations

from dataclasses import dataclass

# The config parameter a BLS model names the models it calls in.
CALLS_PARAMETER = "switchyard.calls"


@dataclass(frozen=True)
class Step:
    """A model a version calls (an ensemble's step, a BLS model's declared call); `version`
    None: the newest version loaded."""

    model: str
    version: int | None

    def __str__(self) -> str:
        return f"{self.model} v{self.version}" if self.version else f"{self.model} (newest)"


def ensemble_steps(config: dict) -> list[Step]:
    """The distinct steps of an ensemble's config in their order; [] for any other model."""
    if config.get("platform") != "ensemble":
        return []
    out: list[Step] = []
    for step in (config.get("ensemble_scheduling") or {}).get("step") or []:
        try:
            version = int(step.get("model_version", -1))
        except (TypeError, ValueError):
            version = -1
        found = Step(str(step.get("model_name", "")), version if version > 0 else None)
        if found.model and found not in out:
            out.append(found)
    return out


def declared_calls(config: dict) -> list[Step]:
    """The models a config declares it calls (`parameters { key: "switchyard.calls" ...}`),
    distinct, in order; [] when it declares none. ValueError as `parse_calls`."""
    raw = ((config.get("parameters") or {}).get(CALLS_PARAMETER) or {}).get("string_value", "")
    return parse_calls(raw)


def parse_calls(raw: str) -> list[Step]:
    """The calls a `switchyard.calls` value lists, distinct, in order. ValueError for an
    entry that is not `name` or `name:version` (version a positive integer)."""
    out: list[Step] = []
    for entry in str(raw).split(","):
        entry = entry.strip()
        if not entry:
            continue
        name, _, pinned = entry.partition(":")
        name = name.strip()
        if not name or (pinned and not (pinned.strip().isdigit() and int(pinned) > 0)):
            raise ValueError(
                f"{CALLS_PARAMETER}: {entry!r} is not a model name, optionally with a "
                "version (risk_score or risk_score:2)"
            )
        found = Step(name, int(pinned) if pinned else None)
        if found not in out:
            out.append(found)
    return out


def model_calls(config: dict) -> list[Step]:
    """Every model a version calls: an ensemble's steps, else the models it declares
    (a BLS model's); [] when there is none or the declaration does not parse."""
    steps = ensemble_steps(config)
    if steps:
        return steps
    try:
        return declared_calls(config)
    except ValueError:
        return []  # refused at upload (the config checks); never a caller elsewhere


def is_ensemble(config: dict) -> bool:
    return config.get("platform") == "ensemble"


def serves_step(step: Step, served: list[int]) -> bool:
    """Whether versions `served` of the step's model satisfy it: its pinned version among
    them, or any version for a step that takes the newest."""
    return step.version in served if step.version else bool(served)
