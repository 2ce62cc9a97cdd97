"""BenchmarkRun: one load test (or imported report) of a model version, its results and verdict."""

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models

from deployments.models import TritonCluster, TritonNode
from models_registry.models import ModelVersion


class BenchmarkRun(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    class Source(models.TextChoices):
        RUN = "run", "Run by Switchyard"
        PERF_ANALYZER = "perf_analyzer", "Imported perf_analyzer CSV"
        MODEL_ANALYZER = "model_analyzer", "Imported Model Analyzer report"

    FINISHED = (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED)

    version = models.ForeignKey(ModelVersion, on_delete=models.CASCADE, related_name="benchmarks")
    source = models.CharField(max_length=20, choices=Source.choices, default=Source.RUN)
    # Imports have no cluster or node; a deleted cluster keeps the results.
    cluster = models.ForeignKey(
        TritonCluster, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    node = models.ForeignKey(
        TritonNode, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    node_name = models.CharField(max_length=200, blank=True)
    concurrency = ArrayField(models.PositiveIntegerField(), default=list)
    duration_s = models.FloatField(default=10.0)
    batch_size = models.PositiveIntegerField(default=1)
    # {"INPUT_NAME": [dims without batch]} for inputs with variable (-1) dims.
    dims_override = models.JSONField(default=dict, blank=True)
    # A decoupled model's generate request (input name -> value) each stream sends; {} for
    # one from the generated inputs (benchmarks/runner.py).
    stream_body = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    level_index = models.PositiveIntegerField(default=0)
    progress_pct = models.FloatField(default=0.0)
    cancel_requested = models.BooleanField(default=False)
    # [{"concurrency", "requests", "errors", "throughput_rps", "p50_ms", ...}] in level order.
    results = models.JSONField(default=list, blank=True)
    # {"passed": bool, "reasons": [str], "checks": [...], "deltas": [...], "baseline": {...}}
    verdict = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    file_name = models.CharField(max_length=300, blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The running task's lease (deployments/leases.py): touched while it works.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # Set when its task could not be queued (the broker was out of reach); the sweep queues
    # it again and clears this (deployments/leases.py).
    unqueued_since = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["version", "status"]),
            # Lists are newest first, a page at a time: the index walks them (no sort).
            models.Index(fields=["-created_at", "-id"], name="benchmark_newest_first"),
        ]

    def __str__(self) -> str:
        return f"benchmark {self.pk} of {self.version}"

    @property
    def is_finished(self) -> bool:
        return self.status in self.FINISHED

    @property
    def has_passed(self) -> bool:
        return self.status == self.Status.SUCCEEDED and bool(self.verdict.get("passed"))
