"""Clusters, nodes, the desired serving state per (cluster, model), deployments and drift."""

from django.conf import settings
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models

from models_registry.models import Model, ModelVersion

cluster_name_validator = RegexValidator(
    r"^[a-z0-9][a-z0-9_.-]*$", "Use lower-case letters, digits, '_', '.' or '-'."
)


class TritonCluster(models.Model):
    class Environment(models.TextChoices):
        STAGING = "staging", "Staging"
        PRODUCTION = "production", "Production"

    class PushMode(models.TextChoices):
        UPLOAD = "upload", "Upload (files in the load request)"
        FILESYSTEM = "filesystem", "Filesystem (shared model repository)"

    name = models.CharField(max_length=63, unique=True, validators=[cluster_name_validator])
    environment = models.CharField(max_length=20, choices=Environment.choices)
    push_mode = models.CharField(max_length=20, choices=PushMode.choices, default="upload")
    repository_path = models.CharField(max_length=500, blank=True)
    # {"driver": "nginx"|"none", "url": "<where clients send inference>", ...driver settings}
    router = models.JSONField(default=dict, blank=True)
    # {"source": "scrape"|"prometheus", "url": "<prometheus url>"}
    metrics = models.JSONField(default=dict, blank=True)
    gpu_type = models.CharField(max_length=100, blank=True)
    # Releases on this cluster need a passing benchmark of the candidate (issue: evidence).
    require_benchmark = models.BooleanField(default=False)
    # Releases on this cluster need the model to have an SLA (what the gates judge against).
    require_sla = models.BooleanField(default=False)
    node_hourly_cost = models.DecimalField(
        max_digits=10, decimal_places=4, default=0, validators=[MinValueValidator(0)]
    )
    # The key Triton's restricted APIs (repository, shared memory, trace, logging) ask for,
    # held by the control plane only: encrypted here, or a reference to where it lives
    # ("env:NAME", "file:/path"). Never logged, never shown back (deployments/node_keys.py).
    api_key_ciphertext = models.TextField(blank=True, default="")
    api_key_ref = models.CharField(max_length=300, blank=True, default="")
    # Backends allowed here beyond SWITCHYARD_ALLOWED_BACKENDS (an operator's audited choice).
    custom_backends = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def has_api_key(self) -> bool:
        """Whether the cluster holds a node key of its own (the default may still apply)."""
        return bool(self.api_key_ciphertext or self.api_key_ref)

    @property
    def key_kind(self) -> str:
        """How its key is held: 'stored' (encrypted here), 'env', 'file', '' (none)."""
        if self.api_key_ciphertext:
            return "stored"
        return self.api_key_ref.partition(":")[0] if self.api_key_ref else ""

    @property
    def warnings(self) -> list[str]:
        return [warning for node in self.nodes.all() for warning in node.warnings]


class TritonNode(models.Model):
    class Health(models.TextChoices):
        UNKNOWN = "unknown", "Unknown"
        UP = "up", "Up"
        DOWN = "down", "Down"

    class ControlAccess(models.TextChoices):
        UNKNOWN = "unknown", "Not known yet"
        RESTRICTED = "restricted", "Refuses model control without the key"
        OPEN = "open", "Answers model control without any key"

    cluster = models.ForeignKey(TritonCluster, on_delete=models.CASCADE, related_name="nodes")
    name = models.CharField(max_length=100)
    # http(s)://host:port; node_create checks it (deployments.validation), stricter than a URL.
    http_url = models.CharField(max_length=300)
    # host:port of Triton's gRPC endpoint; model control goes there when set (docs/TRITON.md §api).
    grpc_url = models.CharField(max_length=300, blank=True)
    metrics_url = models.CharField(max_length=300, blank=True)
    health = models.CharField(max_length=10, choices=Health.choices, default=Health.UNKNOWN)
    server_version = models.CharField(max_length=50, blank=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    # Whether the node lists its repository to a caller without any key (asked at
    # registration and on every reconcile pass): an open node lets anyone who reaches its
    # port load and unload models (deployments/node_keys.py, docs/operations.md).
    control_access = models.CharField(
        max_length=12, choices=ControlAccess.choices, default=ControlAccess.UNKNOWN
    )
    # Cost (docs/COSTS.md): the node's own hourly price, else gpu_hourly_cost x gpu_count,
    # else the cluster's node_hourly_cost. execution_slots: how many inferences run at once
    # (default: gpu_count on GPU nodes, else 1); capacity = wall time x slots.
    hourly_cost = models.DecimalField(
        max_digits=10, decimal_places=4, null=True, blank=True, validators=[MinValueValidator(0)]
    )
    gpu_hourly_cost = models.DecimalField(
        max_digits=10, decimal_places=4, null=True, blank=True, validators=[MinValueValidator(0)]
    )
    gpu_count = models.PositiveIntegerField(null=True, blank=True)
    execution_slots = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1)]
    )

    class Meta:
        ordering = ["cluster", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="node_name_unique_in_cluster"),
            models.UniqueConstraint(
                fields=["cluster", "http_url"], name="node_url_unique_in_cluster"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.cluster.name}/{self.name}"

    @property
    def warnings(self) -> list[str]:
        if self.control_access != self.ControlAccess.OPEN:
            return []
        return [
            f"Node {self.name} answers model control without a key: anyone who reaches "
            f"{self.http_url} can load and unload models and read its repository. Start it "
            "with --http-restricted-api and --grpc-restricted-protocol and give the cluster "
            "its key (docs/operations.md, Node keys)."
        ]


class ServingState(models.Model):
    """What must be loaded for one model on one cluster (the reconcile target)."""

    cluster = models.ForeignKey(TritonCluster, on_delete=models.CASCADE, related_name="serving")
    model = models.ForeignKey(Model, on_delete=models.PROTECT, related_name="serving")
    generation = models.PositiveIntegerField(default=0)
    # Set while a gray release drives this model ("release:<id>"): deployments then refuse.
    owner = models.CharField(max_length=50, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cluster", "model"], name="one_state_per_model")
        ]

    def __str__(self) -> str:
        return f"{self.model.name} on {self.cluster.name}"

    def version_numbers(self) -> list[int]:
        return sorted(sv.version.version for sv in self.serving_versions.all())


class ServingVersion(models.Model):
    """A version in a serving state; PROTECT makes 'delete a serving version' impossible."""

    state = models.ForeignKey(
        ServingState, on_delete=models.CASCADE, related_name="serving_versions"
    )
    version = models.ForeignKey(ModelVersion, on_delete=models.PROTECT, related_name="serving")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["state", "version"], name="version_once_per_state")
        ]

    def __str__(self) -> str:
        return f"{self.version.model.name} v{self.version.version} serving on {self.state.cluster}"


class Deployment(models.Model):
    class Kind(models.TextChoices):
        DEPLOY = "deploy", "Deploy (make this version the only serving one)"
        UNLOAD = "unload", "Unload the model"

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"

    cluster = models.ForeignKey(TritonCluster, on_delete=models.CASCADE, related_name="deployments")
    model = models.ForeignKey(Model, on_delete=models.PROTECT, related_name="deployments")
    # History survives a deleted version: target_versions keeps the number.
    version = models.ForeignKey(
        ModelVersion, null=True, blank=True, on_delete=models.SET_NULL, related_name="deployments"
    )
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.DEPLOY)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    previous_versions = models.JSONField(default=list)
    target_versions = models.JSONField(default=list)
    error = models.TextField(blank=True)
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
    # The deployments that must succeed first: an ensemble's steps that served nothing on
    # the cluster, deployed with it (deployments/services.py `deployment_create`). Each one's
    # finish queues this one again; one that failed fails this one unrun.
    waits_for = models.ManyToManyField(
        "self", symmetrical=False, blank=True, related_name="waited_by"
    )

    class Meta:
        # Lists are newest first, a page at a time: the index walks them (no sort of the table).
        indexes = [models.Index(fields=["-created_at", "-id"], name="deployment_newest_first")]
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        target = f" v{self.version.version}" if self.version_id else ""
        return f"{self.kind} {self.model.name}{target} on {self.cluster.name}"

    @property
    def is_finished(self) -> bool:
        return self.status in (self.Status.SUCCEEDED, self.Status.FAILED)

    @property
    def waits_for_ids(self) -> list[int]:
        """The ids of the deployments it waits for, in order (prefetch `waits_for`)."""
        return sorted(d.pk for d in self.waits_for.all())


class DeploymentNode(models.Model):
    """One node's part of a deployment: its outcome and timings."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        LOADING = "loading", "Loading"
        WARMING = "warming", "Warming up"
        READY = "ready", "Ready"
        FAILED = "failed", "Failed"
        REVERTED = "reverted", "Reverted to the previous state"
        SKIPPED = "skipped", "Not changed"

    deployment = models.ForeignKey(Deployment, on_delete=models.CASCADE, related_name="nodes")
    # A removed node leaves its deployments' history: the row keeps the node's name.
    node = models.ForeignKey(TritonNode, null=True, on_delete=models.SET_NULL, related_name="+")
    node_name = models.CharField(max_length=100, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    load_ms = models.FloatField(null=True, blank=True)
    warmup_ms = models.FloatField(null=True, blank=True)
    error = models.TextField(blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["node_name"]
        constraints = [
            models.UniqueConstraint(fields=["deployment", "node"], name="one_row_per_node")
        ]

    def __str__(self) -> str:
        return f"{self.deployment_id}@{self.node_name}: {self.status}"


class DriftEvent(models.Model):
    """What reconcile saw and did: a node went down or came back, drift repaired."""

    class Kind(models.TextChoices):
        NODE_DOWN = "node_down", "Node unreachable"
        NODE_UP = "node_up", "Node reachable again"
        MISSING = "missing", "Desired version missing; reloaded"
        UNEXPECTED = "unexpected", "Loaded but not desired; unloaded"
        REPAIR_FAILED = "repair_failed", "Repair failed"

    cluster = models.ForeignKey(TritonCluster, on_delete=models.CASCADE, related_name="drift")
    node = models.ForeignKey(TritonNode, null=True, on_delete=models.SET_NULL, related_name="+")
    node_name = models.CharField(max_length=100, blank=True)  # kept when the node is removed
    model_name = models.CharField(max_length=128, blank=True)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    detail = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.kind} {self.model_name} on {self.node_name}"


class PriceChange(models.Model):
    """A node's or a cluster's price from `effective_at` (the moment it was set) on, until
    the next change; costing charges each minute the price in effect when it ends, so a
    change never re-prices a minute that was already complete (docs/COSTS.md).

    Rows of a node (`node_name` set) hold its four price fields, a cluster's row
    (`node_name` '') its `node_hourly_cost`. The node is named, not linked: a removed node
    keeps the prices its minutes were charged at. Written only by deployments/prices.py.
    """

    cluster = models.ForeignKey(
        TritonCluster, on_delete=models.CASCADE, related_name="price_changes"
    )
    node_name = models.CharField(max_length=100, blank=True)
    effective_at = models.DateTimeField()
    hourly_cost = models.DecimalField(max_digits=10, decimal_places=4, null=True, blank=True)
    gpu_hourly_cost = models.DecimalField(max_digits=10, decimal_places=4, null=True, blank=True)
    gpu_count = models.PositiveIntegerField(null=True, blank=True)
    execution_slots = models.PositiveIntegerField(null=True, blank=True)
    node_hourly_cost = models.DecimalField(max_digits=10, decimal_places=4, null=True, blank=True)
    # The values this change replaced ({} for the first price of a node or cluster).
    before = models.JSONField(default=dict, blank=True)
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    changed_by_username = models.CharField(max_length=150, blank=True)

    class Meta:
        ordering = ["effective_at", "id"]
        indexes = [
            models.Index(fields=["cluster", "node_name", "effective_at"], name="price_in_effect")
        ]

    def __str__(self) -> str:
        where = f"{self.cluster.name}/{self.node_name}" if self.node_name else self.cluster.name
        return f"{where} price from {self.effective_at:%Y-%m-%d %H:%M:%S}"


class FreezeWindow(models.Model):
    """A time when nothing starts or advances on a cluster (or on every cluster): dated, or
    weekly in a time zone (deployments/freeze_windows.py). Rollbacks are never frozen."""

    cluster = models.ForeignKey(
        TritonCluster, null=True, blank=True, on_delete=models.CASCADE, related_name="freezes"
    )
    reason = models.CharField(max_length=300)
    timezone = models.CharField(max_length=64, default="UTC")
    starts_at = models.DateTimeField(null=True, blank=True)
    ends_at = models.DateTimeField(null=True, blank=True)
    weekdays = models.JSONField(default=list, blank=True)  # [0..6], 0 = Monday
    start = models.TimeField(null=True, blank=True)
    end = models.TimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"freeze {self.pk} on {self.cluster_id or 'every cluster'}: {self.reason}"


class FreezeOverride(models.Model):
    """An emergency exception to a cluster's freezes: asked with a reason by one release
    manager, in force once a second one approves, until `expires_at`."""

    cluster = models.ForeignKey(TritonCluster, on_delete=models.CASCADE, related_name="+")
    reason = models.TextField()
    hours = models.FloatField()
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    approved_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"freeze override {self.pk} on {self.cluster_id}: {self.reason[:80]}"
