"""One status vocabulary for the API's async resources (API.md, Status; CHANGELOG 2.0.0).

Versions' checks, deployments, benchmarks and releases each answer `state` (lower-case words
of their own, an enum per resource), `finished` (true once nothing more will happen) and
`outcome` (succeeded | failed | rolled_back | cancelled, null while unfinished), with
`outcome_reason` (why it ended so: the gate, check or error that decided it; null while
unfinished) and `waiting_for` (what a person must do before it goes on: an approval, a
resume, a staging node; null when nothing). The database keeps its own values; a
`Lifecycle` maps them here, in one place per resource.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rest_framework import serializers

OUTCOMES = ("succeeded", "failed", "rolled_back", "cancelled")


class _Computed:
    """A read-only field computed from the whole object (source="*")."""

    def __init__(self, compute: Callable[[Any], Any], **kwargs):
        self._compute = compute
        super().__init__(source="*", read_only=True, **kwargs)

    def to_representation(self, value):
        return self._compute(value)


class _ComputedChoice(_Computed, serializers.ChoiceField):
    pass


class _ComputedBool(_Computed, serializers.BooleanField):
    pass


class _ComputedChar(_Computed, serializers.CharField):
    pass


@dataclass(frozen=True)
class Lifecycle:
    """`states` in order; `outcomes` maps each finished state to its outcome.

    `state_of(obj)` reads the API state from a model row; `refine(obj, outcome)` may turn a
    finished state's outcome into another (a benchmark that ran but missed its verdict);
    `reason_of(obj)` says why a finished one ended so; `waiting_of(obj)` what an unfinished
    one waits for from a person ("" or None: nothing).
    """

    states: tuple[str, ...]
    outcomes: dict[str, str]
    state_of: Callable[[Any], str]
    reason_of: Callable[[Any], str | None]
    refine: Callable[[Any, str], str] = field(default=lambda obj, outcome: outcome)
    waiting_of: Callable[[Any], str | None] = field(default=lambda obj: None)

    def finished(self, obj) -> bool:
        return self.state_of(obj) in self.outcomes

    def outcome(self, obj) -> str | None:
        found = self.outcomes.get(self.state_of(obj))
        return None if found is None else self.refine(obj, found)

    def outcome_reason(self, obj) -> str | None:
        return (self.reason_of(obj) or "") if self.finished(obj) else None

    def waiting_for(self, obj) -> str | None:
        return None if self.finished(obj) else (self.waiting_of(obj) or None)

    def state_field(self, help_text: str = "") -> serializers.ChoiceField:
        return _ComputedChoice(self.state_of, choices=list(self.states), help_text=help_text)

    def finished_field(self) -> serializers.BooleanField:
        return _ComputedBool(self.finished, help_text="True once nothing more will happen.")

    def outcome_field(self) -> serializers.ChoiceField:
        return _ComputedChoice(
            self.outcome,
            choices=list(OUTCOMES),
            allow_null=True,
            help_text="How it ended; null while it is not finished.",
        )

    def outcome_reason_field(self) -> serializers.CharField:
        return _ComputedChar(
            self.outcome_reason,
            allow_null=True,
            help_text="Why it ended so: the gate, check or error that decided it (a "
            "rollback's cause, not the phase that followed it); null while not finished.",
        )

    def waiting_for_field(self) -> serializers.CharField:
        return _ComputedChar(
            self.waiting_for,
            allow_null=True,
            help_text="What it waits for from a person before it goes on (an approval, a "
            "resume, a staging node to smoke-test on); null when it waits for nothing.",
        )
