"""Per-minute rollups of Triton metrics per (cluster, node, model, version)."""

from django.db import models

from deployments.models import TritonCluster


class Rollup(models.Model):
    """One minute of one node: model counters' deltas, or node gauges when model is ''.

    Latency sums are microseconds (Triton's own unit) so rollups add up exactly; the
    averages are sum / (successes + own_successes). `p99_ms` is the largest p99 seen in the
    minute (quantiles never average). Node rows (model_name '') carry only the utilization
    averages.

    `requests`, `successes` and `failures` are the clients' own: the control plane's own
    requests (probes, push warm-ups, smoke tests, benchmarks) are taken off Triton's counts
    and kept per origin in `*_requests` (telemetry/own_split.py). `split_inexact`: some
    interval of the minute could not be split exactly (a counter reset, or an own request
    Triton never counted); its counts were clamped or dropped, never guessed.
    """

    cluster = models.ForeignKey(TritonCluster, on_delete=models.CASCADE, related_name="rollups")
    node_name = models.CharField(max_length=100)
    model_name = models.CharField(max_length=128, blank=True)
    version = models.CharField(max_length=20, blank=True)
    minute = models.DateTimeField()
    requests = models.BigIntegerField(default=0)
    successes = models.BigIntegerField(default=0)
    failures = models.BigIntegerField(default=0)
    request_us = models.FloatField(default=0)
    queue_us = models.FloatField(default=0)
    compute_us = models.FloatField(default=0)
    p99_ms = models.FloatField(null=True, blank=True)
    cpu_util_avg = models.FloatField(null=True, blank=True)
    gpu_util_avg = models.FloatField(null=True, blank=True)
    samples = models.PositiveIntegerField(default=0)
    probe_requests = models.BigIntegerField(default=0)
    warmup_requests = models.BigIntegerField(default=0)
    smoke_requests = models.BigIntegerField(default=0)
    benchmark_requests = models.BigIntegerField(default=0)
    own_successes = models.BigIntegerField(default=0)
    split_inexact = models.BooleanField(default=False)
    # A generative model's output tokens in the minute (its own counter,
    # `vllm:generation_tokens_total`); 0 for a model that counts none.
    output_tokens = models.BigIntegerField(default=0, db_default=0)

    class Meta:
        ordering = ["minute", "node_name", "model_name", "version"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "node_name", "model_name", "version", "minute"],
                name="one_rollup_per_series_minute",
            )
        ]
        indexes = [
            models.Index(fields=["cluster", "minute"], name="rollup_cluster_minute"),
            models.Index(fields=["model_name", "minute"], name="rollup_model_minute"),
            models.Index(fields=["minute"], name="rollup_minute"),
        ]

    def __str__(self) -> str:
        what = f"{self.model_name} v{self.version}" if self.model_name else "node"
        return f"{self.cluster_id}/{self.node_name} {what} @ {self.minute:%Y-%m-%d %H:%M}"
