"""Stored cost rollups: per hour and per day, per (cluster, node, model, version), plus the
node's idle and unknown time, in ticks (reports.costing)."""

from django.db import models

from deployments.models import TritonCluster


class CostRollup(models.Model):
    """One period of one node: a model version's share, or the node's idle or unknown cost.

    `cost_ticks` of all rows of a node and period add up to what the node cost in it.
    `idle_share_ticks` is the idle cost split equally among the versions loaded each minute
    (the ghost report's measure); `minutes` counts the minutes the row covers (loaded
    minutes for a version). Periods "hc", "dc" and "mc" sum a cluster's nodes (node_name ''):
    hours, days and calendar months (UTC).
    A model row's `cost_kind` says what the version's node time was for: serving clients,
    its smoke test (validation) or a benchmark; a temporary model's time is on its real
    model and version (deployments.temporary). Idle and unknown rows have none ('').
    """

    class Period(models.TextChoices):
        HOUR = "hour", "Hour"
        DAY = "day", "Day"
        HOUR_CLUSTER = "hc", "Hour, summed over the cluster's nodes"
        DAY_CLUSTER = "dc", "Day, summed over the cluster's nodes"
        MONTH_CLUSTER = "mc", "Month, summed over the cluster's nodes"

    class Kind(models.TextChoices):
        MODEL = "model", "Model version"
        IDLE = "idle", "Idle"
        UNKNOWN = "unknown", "Unknown (node not scraped)"

    class CostKind(models.TextChoices):
        SERVING = "serving", "Serving"
        VALIDATION = "validation", "Validation (smoke tests)"
        BENCHMARK = "benchmark", "Benchmark"
        NONE = "", "None (idle or unknown)"

    cluster = models.ForeignKey(TritonCluster, on_delete=models.CASCADE, related_name="+")
    node_name = models.CharField(max_length=100)
    period = models.CharField(max_length=4, choices=Period.choices)
    start = models.DateTimeField()
    kind = models.CharField(max_length=7, choices=Kind.choices)
    model_name = models.CharField(max_length=128, blank=True)
    version = models.CharField(max_length=20, blank=True)
    cost_kind = models.CharField(
        max_length=10, choices=CostKind.choices, blank=True, default=CostKind.SERVING
    )
    cost_ticks = models.BigIntegerField(default=0)
    idle_share_ticks = models.BigIntegerField(default=0)
    requests = models.BigIntegerField(default=0)
    successes = models.BigIntegerField(default=0)
    compute_us = models.FloatField(default=0)
    # A generative model's output tokens in the period (0 for one that counts none).
    output_tokens = models.BigIntegerField(default=0, db_default=0)
    minutes = models.IntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=[
                    "cluster",
                    "node_name",
                    "period",
                    "start",
                    "kind",
                    "model_name",
                    "version",
                    "cost_kind",
                ],
                name="one_cost_row_per_series_kind_period",
            )
        ]
        indexes = [models.Index(fields=["period", "start"], name="cost_period_start")]

    def __str__(self) -> str:
        what = (
            f"{self.model_name} v{self.version} {self.cost_kind}" if self.model_name else self.kind
        )
        return f"{self.cluster_id}/{self.node_name} {what} {self.period} {self.start:%Y-%m-%d %H}"


class CostWatermark(models.Model):
    """Every complete hour before `until` is rolled up; reports compute later minutes live."""

    name = models.CharField(max_length=20, unique=True, default="hourly")
    until = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.name} until {self.until:%Y-%m-%d %H:%M}"


class TeamBudget(models.Model):
    """A team's monthly budget; the overview marks teams past 80% and 100% of it."""

    team = models.OneToOneField(
        "models_registry.Team", on_delete=models.CASCADE, related_name="budget"
    )
    monthly_budget = models.DecimalField(max_digits=12, decimal_places=2)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.team.name}: {self.monthly_budget} a month"
