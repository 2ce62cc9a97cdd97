"""Alerts (rows with a lifecycle), the per-node memory samples of the leak watch, and the
per-cluster health settings."""

from django.conf import settings
from django.db import models

from deployments.models import TritonCluster


class Alert(models.Model):
    """One finding about one object, from the moment it fires until it resolves.

    `key` names the object (kind + cluster/node/model/version): while an alert is not
    resolved there is at most one row per key (a partial unique index), so a finding seen
    on every pass updates that row instead of adding one.
    """

    class Kind(models.TextChoices):
        SILENT_FAILURE = "silent_failure", "Silent failure"
        PROBE_FAILED_WHILE_READY = "probe_failed_while_ready", "Probe failed while READY"
        NODE_DOWN = "node_down", "Node down"
        NODE_OPEN = "node_open", "Node open to model control without a key"
        LEAK_SUSPECTED = "leak_suspected", "Memory leak suspected"
        DRIFT_NOT_HEALED = "drift_not_healed", "Drift not healed"
        QUEUE_TIME_OVER_SLA = "queue_time_over_sla", "Queue time over the SLA"
        RELEASE_ROLLED_BACK = "release_rolled_back", "Release rolled back"
        SMOKE_NODE_LOST = "smoke_node_lost", "Node lost during a smoke test"
        PLAN_HALTED = "plan_halted", "Release plan halted"

    class Severity(models.TextChoices):
        INFO = "info", "Info"
        WARNING = "warning", "Warning"
        CRITICAL = "critical", "Critical"

    class State(models.TextChoices):
        FIRING = "firing", "Firing"
        ACKNOWLEDGED = "acknowledged", "Acknowledged"
        RESOLVED = "resolved", "Resolved"

    kind = models.CharField(max_length=40, choices=Kind.choices)
    key = models.CharField(max_length=400)
    severity = models.CharField(max_length=10, choices=Severity.choices)
    state = models.CharField(max_length=15, choices=State.choices, default=State.FIRING)
    # Names are kept as text: a removed node or cluster leaves its alerts readable.
    cluster = models.ForeignKey(
        TritonCluster, null=True, blank=True, on_delete=models.SET_NULL, related_name="alerts"
    )
    cluster_name = models.CharField(max_length=63, blank=True)
    node_name = models.CharField(max_length=100, blank=True)
    model_name = models.CharField(max_length=128, blank=True)
    version = models.PositiveIntegerField(null=True, blank=True)
    summary = models.TextField()
    details = models.JSONField(default=dict, blank=True)
    started_at = models.DateTimeField(auto_now_add=True, db_index=True)
    last_seen_at = models.DateTimeField(auto_now_add=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    acknowledged_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["key"],
                condition=~models.Q(state="resolved"),
                name="one_open_alert_per_key",
            )
        ]
        indexes = [models.Index(fields=["state", "kind"])]

    def __str__(self) -> str:
        return f"{self.kind} {self.key}"

    @property
    def is_open(self) -> bool:
        return self.state != self.State.RESOLVED


class MemorySample(models.Model):
    """A node's memory just before or after a load or unload the control plane performed.

    No foreign key: samples are written from the push's worker threads, outside the
    transaction that may hold a new node row, and outlive removed nodes.
    """

    class Operation(models.TextChoices):
        LOAD = "load", "Load"
        UNLOAD = "unload", "Unload"

    node_id = models.BigIntegerField(db_index=True)
    cluster_name = models.CharField(max_length=63, blank=True)
    node_name = models.CharField(max_length=100, blank=True)
    model_name = models.CharField(max_length=128)
    operation = models.CharField(max_length=10, choices=Operation.choices)
    # Triton's gauges (host memory used, the GPUs' summed) and the tritonserver's RSS when
    # it runs on this host; any may be missing.
    before_host_bytes = models.BigIntegerField(null=True, blank=True)
    after_host_bytes = models.BigIntegerField(null=True, blank=True)
    before_gpu_bytes = models.BigIntegerField(null=True, blank=True)
    after_gpu_bytes = models.BigIntegerField(null=True, blank=True)
    before_rss_bytes = models.BigIntegerField(null=True, blank=True)
    after_rss_bytes = models.BigIntegerField(null=True, blank=True)
    # The host's shared memory (/dev/shm and other tmpfs) for a node on this host.
    before_shm_bytes = models.BigIntegerField(null=True, blank=True)
    after_shm_bytes = models.BigIntegerField(null=True, blank=True)
    ok = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.operation} {self.model_name} on {self.cluster_name}/{self.node_name}"


class ClusterHealth(models.Model):
    """Per-cluster health settings (off by default) and remediation bookkeeping."""

    cluster = models.OneToOneField(
        TritonCluster, on_delete=models.CASCADE, related_name="health_settings"
    )
    # Reload a version whose probe fails while Triton says READY (at most once an hour each).
    remediation_enabled = models.BooleanField(default=False)
    # "<node>/<model>/<version>" -> epoch seconds of the last automatic reload.
    reloads = models.JSONField(default=dict, blank=True)

    def __str__(self) -> str:
        return f"health settings of {self.cluster.name}"
