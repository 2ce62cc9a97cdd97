"""The models a version's config calls, pure: an ensemble's steps.

An ensemble (`platform: "ensemble"`) runs nothing of its own: each request passes through
the models its `ensemble_scheduling.step` entries name, each at a pinned version
(`model_version` > 0) or at the newest one loaded (-1, or unset). Triton answers an
ensemble only while every step is loaded, and unloading a step makes it UNAVAILABLE.
`config` is a stored version's `config_json` (protobuf JSON with the proto's field names;
int64 values may come as strings).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    """A model an ensemble calls; `version` None: the newest version loaded."""

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


def serves_step(step: Step, served: list[int]) -> bool:
    """Whether versions `served` of the step's model satisfy it: its pinned version among
    them, or any version for a step that takes the newest."""
    return step.version in served if step.version else bool(served)
