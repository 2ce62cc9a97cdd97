"""Release (the stored state of one gray release) and ReleaseEvent (its append-only log)."""

from django.conf import settings
from django.db import models

from deployments.models import TritonCluster
from models_registry.models import Model, ModelVersion
from releases.inputs import (
    AnalysisSettings,
    ReleaseInputError,
    parse_analysis,
    parse_stored_steps,
)
from releases.state_machine import TERMINAL, Phase, Spec, State, Step

PHASES = [(p.value, p.value) for p in Phase]


class Release(models.Model):
    cluster = models.ForeignKey(TritonCluster, on_delete=models.PROTECT, related_name="releases")
    model = models.ForeignKey(Model, on_delete=models.PROTECT, related_name="releases")
    baseline = models.ForeignKey(ModelVersion, on_delete=models.PROTECT, related_name="+")
    candidate = models.ForeignKey(ModelVersion, on_delete=models.PROTECT, related_name="+")
    strategy = models.CharField(max_length=20, default="canary")
    # Spec: steps as data ([{"weight", "manual_gate"}]) and the analysis settings.
    steps = models.JSONField()
    step_interval_s = models.FloatField(default=30.0)
    analysis = models.JSONField(default=dict)
    # The model's SLA when the release started: the gates judge against it, and the model's
    # SLA cannot change while the release runs (models_registry.signals.protected_change).
    sla = models.JSONField(default=dict)
    sticky_header = models.CharField(max_length=100, blank=True)
    # The name the candidate serves under beside the model's own: its sibling name
    # (`<model>--c<version>`, deployments/temporary.py) when its config differs from the
    # baseline's, "" when it serves under the model's name with the baseline (one config).
    candidate_name = models.CharField(max_length=200, blank=True, default="")
    # A graph release (releases/graph.py `graph_callers`): the ensembles serving on the
    # cluster that call the model, each [{"model", "version", "served_as"}]: while the
    # candidate takes traffic, `served_as` (the caller's version, calling the candidate's
    # sibling) takes the same share of the caller's traffic, and the caller is judged too.
    callers = models.JSONField(default=list, blank=True)
    # What the candidate calls that the cluster did not serve at the version it pins (an
    # ensemble pinning a new step version), [{"model", "version", "served_as"}]: served
    # under the step's sibling name while the candidate is (its sibling calls it there),
    # added to the step's own versions at promotion (releases/graph.py `steps_to_load`).
    step_loads = models.JSONField(default=list, blank=True)
    progress_deadline_s = models.FloatField(default=600.0)
    # The shadow before the first step (0: none): for `shadow_s` the router mirrors
    # `shadow_share` percent of the model's requests to the candidate, answers thrown away.
    shadow_s = models.FloatField(default=0.0)
    shadow_share = models.FloatField(default=0.0)
    # A shadow's answer comparer (releases/agreement.py): its settings as stored, every knob
    # ({} for none), and what it found so far (counts, per output, examples).
    agreement = models.JSONField(default=dict, blank=True)
    agreement_state = models.JSONField(default=dict, blank=True)
    drain_s = models.FloatField(default=2.0)
    # State (see releases/state_machine.State); times are epoch seconds.
    phase = models.CharField(max_length=20, choices=PHASES, default=Phase.PENDING.value)
    step_index = models.PositiveIntegerField(default=0)
    candidate_weight = models.FloatField(default=0.0)
    failed_checks = models.PositiveIntegerField(default=0)
    inconclusive_checks = models.PositiveIntegerField(default=0)
    step_started_at = models.FloatField(default=0.0)
    phase_started_at = models.FloatField(default=0.0)
    paused_from = models.CharField(max_length=20, blank=True)
    checked_until = models.FloatField(null=True, blank=True)
    reason = models.TextField(blank=True)
    # Why it ends the way it does (State.cause; the API's `outcome_reason`).
    outcome_reason = models.TextField(blank=True)
    # What the tick has applied (so effects are re-applied only when they change).
    router_weight = models.FloatField(null=True, blank=True)
    router_mirror = models.FloatField(null=True, blank=True)  # percent mirrored (a shadow)
    applied_serving = models.CharField(max_length=30, blank=True)
    load_error = models.TextField(blank=True)
    # A human action waiting for the next tick: {"action", "actor", "reason"}.
    pending_action = models.JSONField(null=True, blank=True)
    # Counters at the start of the current analysis interval, per version (see observe.py).
    interval = models.JSONField(default=dict, blank=True)
    last_analysis = models.JSONField(default=dict, blank=True)
    # The model's unrouted share measured at the start (releases/unrouted.py), the limit it
    # was held to, and whether a human confirmed starting above it (`confirm_unrouted`).
    unrouted_at_start = models.JSONField(default=dict, blank=True)
    # What could keep it from being judged, found at the start (releases/warnings.py).
    warnings = models.JSONField(default=list, blank=True)
    # The fast guard's recent per-tick samples (releases/guard_log.py), newest last.
    guard_samples = models.JSONField(default=list, blank=True)
    revision = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        # Lists are newest first, a page at a time: the index walks them (no sort of the table).
        indexes = [models.Index(fields=["-created_at", "-id"], name="release_newest_first")]
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return (
            f"{self.model.name} v{self.baseline.version} → v{self.candidate.version} "
            f"on {self.cluster.name}"
        )

    @property
    def is_active(self) -> bool:
        return Phase(self.phase) not in TERMINAL

    def analysis_settings(self) -> AnalysisSettings:
        """The analysis knobs, parsed (ReleaseInputError for a junk stored value)."""
        return parse_analysis(self.analysis or {})

    @property
    def analysis_interval_s(self) -> float:
        """Seconds between two interval analyses (the step interval unless set apart; also
        for a junk stored value, which the tick refuses on its own)."""
        try:
            interval = self.analysis_settings().interval_s
        except ReleaseInputError:
            interval = None
        return interval if interval is not None else float(self.step_interval_s)

    @property
    def next_check_at(self) -> float | None:
        """Epoch seconds of the next interval analysis while the release is progressing."""
        start = (self.interval or {}).get("start") or {}
        if self.phase not in (Phase.PROGRESSING.value, Phase.SHADOWING.value) or "at" not in start:
            return None
        return float(start["at"]) + self.analysis_interval_s

    @property
    def ended_without_candidate(self) -> bool:
        """Rolled back (or rolling back) or failed: the candidate serves nothing."""
        return self.phase in (
            Phase.ROLLING_BACK.value,
            Phase.ROLLED_BACK.value,
            Phase.FAILED.value,
        )

    @property
    def serving_weight(self) -> float:
        """The candidate's share of traffic now: 0 once it is rolled back or failed (the
        stored weight then is the one it had reached)."""
        if self.ended_without_candidate:
            return float(self.router_weight or 0.0) if self.phase == "ROLLING_BACK" else 0.0
        return self.candidate_weight

    @property
    def peak_weight(self) -> float:
        """The highest weight the candidate reached (steps passed and the current one)."""
        passed = [float(s.get("weight", 0)) for s in (self.steps or [])[: self.step_index]]
        return max([self.candidate_weight, *passed])

    def callers_judged(self) -> list[dict]:
        """A graph release's callers, each with what the last analysis saw of it (`seen`:
        per arm and its check, releases/tick.py), None before one judged it."""
        seen = (self.last_analysis or {}).get("callers") or {}
        return [{**caller, "seen": seen.get(caller["model"])} for caller in self.callers or []]

    def spec(self) -> Spec:
        """The state machine's spec; ReleaseInputError when a stored setting is junk."""
        analysis = self.analysis_settings()
        return Spec(
            steps=tuple(Step(w, gate) for w, gate in parse_stored_steps(self.steps)),
            step_interval_s=self.step_interval_s,
            min_requests=analysis.min_requests,
            max_failed_checks=analysis.max_failed_checks,
            latency_tolerance=analysis.latency_tolerance,
            progress_deadline_s=self.progress_deadline_s,
            drain_s=self.drain_s,
            strategy=self.strategy,
            on_node_loss=analysis.on_node_loss,
            max_inconclusive_checks=analysis.max_inconclusive_checks,
            on_inconclusive=analysis.on_inconclusive,
            shadow_s=self.shadow_s,
        )

    def state(self) -> State:
        return State(
            phase=Phase(self.phase),
            step_index=self.step_index,
            candidate_weight=self.candidate_weight,
            failed_checks=self.failed_checks,
            inconclusive_checks=self.inconclusive_checks,
            step_started_at=self.step_started_at,
            phase_started_at=self.phase_started_at,
            paused_from=Phase(self.paused_from) if self.paused_from else None,
            reason=self.reason,
            cause=self.outcome_reason,
            checked_until=self.checked_until,
        )

    def state_fields(self, state: State) -> dict:
        """Column values for a State (for a guarded update)."""
        return {
            "phase": state.phase.value,
            "step_index": state.step_index,
            "candidate_weight": state.candidate_weight,
            "failed_checks": state.failed_checks,
            "inconclusive_checks": state.inconclusive_checks,
            "step_started_at": state.step_started_at,
            "phase_started_at": state.phase_started_at,
            "paused_from": state.paused_from.value if state.paused_from else "",
            "reason": state.reason,
            "outcome_reason": state.cause,
            "checked_until": state.checked_until,
        }


class ReleaseEvent(models.Model):
    release = models.ForeignKey(Release, on_delete=models.CASCADE, related_name="events")
    # phase | step | check | rejected | action | effect | unrouted (a confirmed start)
    kind = models.CharField(max_length=20)
    phase = models.CharField(max_length=20)
    message = models.TextField()
    data = models.JSONField(default=dict, blank=True)
    actor = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.release_id} {self.kind}: {self.message}"


class ServingLoad(models.Model):
    """One load of a release's serving set, run on the fleet lane (`releases.serving_load`):
    a load can take minutes, so the tick only starts it and observes it (releases/loads.py).
    The task holds a lease on the row; a tick that finds it lost finishes it as failed."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    release = models.ForeignKey(Release, on_delete=models.CASCADE, related_name="loads")
    which = models.CharField(max_length=30)  # "baseline+candidate", "candidate", "baseline"
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    queued_at = models.DateTimeField()  # last sent to the fleet lane
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    seen_at = models.DateTimeField(null=True, blank=True)  # a tick took its outcome

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"release {self.release_id} load {self.which}: {self.status}"
