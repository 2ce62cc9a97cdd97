"""Release plans: one candidate version walked through waves of clusters (plans/state_machine.py).

A plan is data: its waves as a list with an index (like a release's steps), one
`PlanRelease` row per wave and cluster (the release once started, or why it could not
start), the approvals and refusals given to waves, and its events."""

from django.conf import settings
from django.db import models

from deployments.models import TritonCluster
from models_registry.models import Model, ModelVersion
from plans.state_machine import Phase
from releases.models import Release

PHASES = [(p.value, p.value) for p in Phase]


class ReleasePlan(models.Model):
    model = models.ForeignKey(Model, on_delete=models.PROTECT, related_name="release_plans")
    candidate = models.ForeignKey(ModelVersion, on_delete=models.PROTECT, related_name="+")
    # [{"clusters": [names], "release": {release settings}, "bake_s": s, "approval": bool}]
    waves = models.JSONField()
    on_failure = models.CharField(max_length=20, default="halt")
    phase = models.CharField(max_length=20, choices=PHASES, default=Phase.PENDING.value)
    wave_index = models.PositiveIntegerField(default=0)
    baked_from = models.FloatField(null=True, blank=True)  # epoch seconds
    reason = models.TextField(blank=True)
    # A person's halt/resume/rollback, taken by the next tick ({"action", "actor", "reason"}).
    pending_action = models.JSONField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["-created_at", "-id"], name="plans_newest")]

    def __str__(self) -> str:
        return f"plan {self.pk}: {self.model_id} v{self.candidate_id} ({self.phase})"

    @property
    def is_active(self) -> bool:
        from plans.state_machine import TERMINAL

        return Phase(self.phase) not in TERMINAL


class PlanRelease(models.Model):
    """One cluster of one wave: its release once started, else why it could not start."""

    plan = models.ForeignKey(ReleasePlan, on_delete=models.CASCADE, related_name="cells")
    wave = models.PositiveIntegerField()
    cluster = models.ForeignKey(TritonCluster, on_delete=models.PROTECT, related_name="+")
    release = models.ForeignKey(
        Release, null=True, blank=True, on_delete=models.PROTECT, related_name="plan_cells"
    )
    error = models.TextField(blank=True)
    # Under the rollback policy, a cluster whose release had already succeeded gets the
    # baseline back by a release of its own (blue/green), recorded here; or why it could not.
    revert = models.ForeignKey(
        Release, null=True, blank=True, on_delete=models.PROTECT, related_name="plan_reverts"
    )
    revert_error = models.TextField(blank=True)

    class Meta:
        ordering = ["wave", "id"]
        constraints = [
            models.UniqueConstraint(fields=["plan", "cluster"], name="plans_cluster_once")
        ]

    def __str__(self) -> str:
        return f"plan {self.plan_id} wave {self.wave + 1} on {self.cluster_id}"


class PlanApproval(models.Model):
    """A release manager's decision on one wave of a plan (never its author's: four-eyes)."""

    plan = models.ForeignKey(ReleasePlan, on_delete=models.CASCADE, related_name="approvals")
    wave = models.PositiveIntegerField()
    decision = models.CharField(max_length=10)  # approved | refused
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_name = models.CharField(max_length=150)
    comment = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"plan {self.plan_id} wave {self.wave + 1}: {self.decision} by {self.actor_name}"


class PlanEvent(models.Model):
    plan = models.ForeignKey(ReleasePlan, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=20)  # phase | action | approval | start | effect
    phase = models.CharField(max_length=20)
    wave = models.PositiveIntegerField()
    message = models.TextField()
    actor = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"plan {self.plan_id} {self.kind}: {self.message}"
