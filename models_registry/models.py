"""Registry models: teams, models with their SLA, immutable versions, aliases and their moves."""

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models

team_name_validator = RegexValidator(
    r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
    "Use letters, digits, '_', '.' or '-', starting with a letter or digit.",
)
# Triton model names are directory names: letters, digits, '_', '.', '-'.
model_name_validator = RegexValidator(
    r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$",
    "A Triton model name uses letters, digits, '_', '.' or '-' and cannot start with '.' or '-'.",
)
label_validator = RegexValidator(
    r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$",
    "A label uses letters, digits, '.', '_', '+' or '-', starting with a letter or digit.",
)
alias_validator = RegexValidator(
    r"^[a-z][a-z0-9_-]*$", "An alias is lower-case letters, digits, '_' or '-'."
)


class Team(models.Model):
    name = models.CharField(max_length=100, unique=True, validators=[team_name_validator])
    # Only members (and superusers) write the team's models, versions, aliases and SLA.
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="teams", blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Model(models.Model):
    name = models.CharField(max_length=128, unique=True, validators=[model_name_validator])
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="models")
    description = models.TextField(blank=True)
    tags = ArrayField(models.CharField(max_length=50), default=list, blank=True)
    # SLA: any may be unset; gates and verdicts skip unset ones.
    sla_p99_latency_ms = models.FloatField(null=True, blank=True, validators=[MinValueValidator(0)])
    sla_min_success_rate = models.FloatField(
        null=True, blank=True, validators=[MinValueValidator(0)]
    )
    sla_max_queue_ms = models.FloatField(null=True, blank=True, validators=[MinValueValidator(0)])
    sla_min_throughput_rps = models.FloatField(
        null=True, blank=True, validators=[MinValueValidator(0)]
    )
    # A streaming model's: p95 time to its first token through the router.
    sla_p95_first_token_ms = models.FloatField(
        null=True, blank=True, validators=[MinValueValidator(0)]
    )
    # A generative model's, per stream: p95 time between tokens after the first, and the
    # fewest tokens per second 95 % of streams must get (docs/ARCHITECTURE.md, tokens).
    sla_p95_inter_token_ms = models.FloatField(
        null=True, blank=True, validators=[MinValueValidator(0)]
    )
    sla_min_tokens_per_s = models.FloatField(
        null=True, blank=True, validators=[MinValueValidator(0)]
    )
    # The next Triton version number; only ever grows, under a row lock (never reused).
    next_version = models.PositiveIntegerField(default=1)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(sla_min_success_rate__lte=100)
                | models.Q(sla_min_success_rate__isnull=True),
                name="model_sla_success_rate_is_a_percentage",
            )
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def sla(self) -> dict:
        return {
            "p99_latency_ms": self.sla_p99_latency_ms,
            "min_success_rate": self.sla_min_success_rate,
            "max_queue_ms": self.sla_max_queue_ms,
            "min_throughput_rps": self.sla_min_throughput_rps,
            "p95_first_token_ms": self.sla_p95_first_token_ms,
            "p95_inter_token_ms": self.sla_p95_inter_token_ms,
            "min_tokens_per_s": self.sla_min_tokens_per_s,
        }


class ModelVersion(models.Model):
    class Status(models.TextChoices):
        REGISTERED = "registered", "Registered"
        SMOKE_PASSED = "smoke_passed", "Smoke test passed"
        SMOKE_FAILED = "smoke_failed", "Smoke test failed"

    model = models.ForeignKey(Model, on_delete=models.PROTECT, related_name="versions")
    version = models.PositiveIntegerField()
    label = models.CharField(max_length=100, validators=[label_validator])
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.REGISTERED)
    config_text = models.TextField()
    config_json = models.JSONField()
    # [{"role": "config"|"file", "path", "size", "sha256"}], sorted by (role, path).
    manifest = models.JSONField()
    digest = models.CharField(max_length=64, db_index=True)
    size_bytes = models.BigIntegerField()
    validation = models.JSONField(default=dict)
    source_commit = models.CharField(max_length=100, blank=True)
    training_run_url = models.URLField(max_length=500, blank=True)
    notes = models.TextField(blank=True)
    # A version made from another's files with a changed config (model_version_derive).
    derived_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="derived"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["model", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["model", "version"], name="version_unique_per_model"),
            models.UniqueConstraint(fields=["model", "label"], name="label_unique_per_model"),
        ]

    def __str__(self) -> str:
        return f"{self.model.name} v{self.version} ({self.label})"

    @property
    def short_digest(self) -> str:
        return self.digest[:12]

    @property
    def warnings(self) -> list[dict]:
        return list(self.validation.get("warnings", []))

    def files(self) -> list[dict]:
        return [entry for entry in self.manifest if entry["role"] == "file"]

    def config_entry(self) -> dict:
        return next(entry for entry in self.manifest if entry["role"] == "config")


# The alias that names what production serves (moved by deploys and releases there).
PRODUCTION_ALIAS = "production"


class Alias(models.Model):
    model = models.ForeignKey(Model, on_delete=models.CASCADE, related_name="aliases")
    name = models.CharField(max_length=50, validators=[alias_validator])
    version = models.ForeignKey(ModelVersion, on_delete=models.PROTECT, related_name="aliases")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["model", "name"], name="alias_unique_per_model")
        ]

    def __str__(self) -> str:
        return f"{self.model.name}@{self.name}"


class AliasMove(models.Model):
    """The history of an alias: every move, who made it and when."""

    alias = models.ForeignKey(Alias, on_delete=models.CASCADE, related_name="moves")
    from_version = models.ForeignKey(
        ModelVersion, null=True, on_delete=models.PROTECT, related_name="+"
    )
    to_version = models.ForeignKey(ModelVersion, on_delete=models.PROTECT, related_name="+")
    moved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    moved_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-moved_at", "-id"]

    def __str__(self) -> str:
        return f"{self.alias} -> v{self.to_version.version}"
