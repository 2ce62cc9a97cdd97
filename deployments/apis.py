"""Clusters, nodes and deployments REST resources (API.md, Clusters and deployments)."""

from django.conf import settings
from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts import inputs
from accounts.errors import NotFound
from accounts.idempotency import idempotent
from accounts.lifecycle import Lifecycle
from accounts.pagination import PAGE_PARAMETERS, ListFilters, list_filters, paginated
from accounts.permissions import ReleaseManagersWrite
from accounts.waits import WAIT_PARAMETER, group_name, long_poll
from deployments import node_status, prices, selectors, services
from deployments.models import Deployment, DeploymentNode, cluster_name_validator
from models_registry.models import Model
from models_registry.selectors import model_version_find


def _cluster_or_404(name: str):
    cluster = selectors.cluster_get(name=name)
    if cluster is None:
        raise Http404(f"No cluster named '{name}'.")
    return cluster


class _SettingsSerializer(serializers.Serializer):
    """An object of known string keys; the rules (deployments.validation) run in the service,
    which names the refused key (`router.foo`)."""

    def to_internal_value(self, data):
        if not isinstance(data, dict):
            raise serializers.ValidationError("Must be an object.")
        return dict(data)

    def to_representation(self, instance):
        return dict(instance)


class RouterSerializer(_SettingsSerializer):
    driver = serializers.ChoiceField(choices=["nginx", "none"], default="none")
    url = serializers.CharField(required=False, help_text="http(s)://host:port clients call")
    listen = serializers.CharField(required=False, help_text="nginx only: 127.0.0.1:<port>")
    grpc_listen = serializers.CharField(
        required=False,
        help_text="nginx only: 127.0.0.1:<port> of a gRPC (http2) listener passing gRPC "
        "through to the nodes' grpc_url; gRPC is never split by version",
    )
    prefix_dir = serializers.CharField(
        required=False, help_text="nginx only: a folder under SWITCHYARD_ROUTER_ROOTS"
    )


class MetricsSerializer(_SettingsSerializer):
    source = serializers.ChoiceField(choices=["scrape", "prometheus"], default="scrape")
    url = serializers.CharField(required=False, help_text="Prometheus base URL")


class NodeSerializer(inputs.InputSerializer):
    # The name is a path segment of the node's URL (/clusters/{name}/nodes/{node}/).
    name = serializers.RegexField(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=100)
    http_url = serializers.CharField(max_length=300, help_text="http(s)://host:port")
    grpc_url = serializers.CharField(
        max_length=300, required=False, allow_blank=True, default="", help_text="host:port"
    )
    metrics_url = serializers.CharField(
        max_length=300, required=False, allow_blank=True, default="", help_text="http(s) URL"
    )
    # Cost (docs/COSTS.md): all optional; the cluster's node_hourly_cost applies otherwise.
    _price = {"max_digits": 10, "decimal_places": 4, "min_value": 0, "required": False}
    hourly_cost = serializers.DecimalField(allow_null=True, **_price)
    gpu_hourly_cost = serializers.DecimalField(allow_null=True, **_price)
    gpu_count = serializers.IntegerField(min_value=0, required=False, allow_null=True)
    execution_slots = serializers.IntegerField(min_value=1, required=False, allow_null=True)
    health = serializers.CharField(read_only=True)
    server_version = serializers.CharField(read_only=True)
    last_seen_at = serializers.DateTimeField(read_only=True, allow_null=True)
    control_access = serializers.ChoiceField(
        choices=["unknown", "restricted", "open"],
        read_only=True,
        help_text="open: the node lists its repository to a caller without any key",
    )
    warnings = serializers.ListField(child=serializers.CharField(), read_only=True)


class NodePriceSerializer(inputs.InputSerializer):
    """A node's price fields (docs/COSTS.md); those given change from now on."""

    _price = NodeSerializer._price
    hourly_cost = serializers.DecimalField(allow_null=True, **_price)
    gpu_hourly_cost = serializers.DecimalField(allow_null=True, **_price)
    gpu_count = serializers.IntegerField(min_value=0, required=False, allow_null=True)
    execution_slots = serializers.IntegerField(min_value=1, required=False, allow_null=True)


class PriceChangeSerializer(serializers.Serializer):
    node = serializers.CharField(
        source="node_name", help_text="'' for the cluster's node_hourly_cost"
    )
    effective_at = serializers.DateTimeField(help_text="in effect from this moment on")
    hourly_cost = serializers.DecimalField(max_digits=10, decimal_places=4, allow_null=True)
    gpu_hourly_cost = serializers.DecimalField(max_digits=10, decimal_places=4, allow_null=True)
    gpu_count = serializers.IntegerField(allow_null=True)
    execution_slots = serializers.IntegerField(allow_null=True)
    node_hourly_cost = serializers.DecimalField(max_digits=10, decimal_places=4, allow_null=True)
    before = serializers.DictField(help_text="the values it replaced ({} for the first price)")
    changed_by = serializers.CharField(
        source="changed_by_username", help_text="'' for a price recorded by the system"
    )


class ClusterSerializer(inputs.InputSerializer):
    name = serializers.CharField(max_length=63, validators=[cluster_name_validator])
    environment = serializers.ChoiceField(choices=["staging", "production"])
    push_mode = serializers.ChoiceField(choices=["upload", "filesystem"], default="upload")
    repository_path = serializers.CharField(required=False, allow_blank=True, default="")
    router = RouterSerializer(required=False)
    metrics = MetricsSerializer(required=False)
    gpu_type = serializers.CharField(required=False, allow_blank=True, default="")
    require_benchmark = serializers.BooleanField(required=False, default=False)
    require_sla = serializers.BooleanField(
        required=False,
        default=False,
        help_text="releases here refuse a model without an SLA (400) instead of warning",
    )
    node_hourly_cost = serializers.DecimalField(
        max_digits=10, decimal_places=4, required=False, min_value=0
    )
    custom_backends = serializers.ListField(
        child=serializers.RegexField(r"^[a-z0-9][a-z0-9_]*$", max_length=64),
        required=False,
        max_length=32,
        help_text="backends this cluster may load beyond SWITCHYARD_ALLOWED_BACKENDS; each is "
        "native code on its nodes (a change is audited as cluster.backends_changed)",
    )
    api_key = serializers.CharField(
        write_only=True,
        required=False,
        allow_blank=True,
        max_length=256,
        trim_whitespace=False,
        help_text="the key the nodes' restricted APIs ask for, stored encrypted; '' clears it. "
        "Never answered back",
    )
    api_key_ref = serializers.CharField(
        write_only=True,
        required=False,
        allow_blank=True,
        max_length=300,
        help_text="where the key lives instead: env:SWITCHYARD_NODE_KEY_<NAME> or "
        "file:<path under SWITCHYARD_SECRET_FILE_ROOTS>; '' clears it",
    )
    has_api_key = serializers.BooleanField(read_only=True)
    api_key_kind = serializers.ChoiceField(
        choices=["", "stored", "env", "file"],
        read_only=True,
        source="key_kind",
        help_text="how the cluster's key is held ('' when it has none of its own)",
    )
    warnings = serializers.ListField(child=serializers.CharField(), read_only=True)
    nodes = NodeSerializer(many=True, read_only=True)
    created_at = serializers.DateTimeField(read_only=True)

    def validate_custom_backends(self, value: list[str]) -> list[str]:
        return sorted(set(value))


class ClusterListCreateApi(APIView):
    """GET, POST /api/v1/clusters/: release managers register clusters."""

    permission_classes = [ReleaseManagersWrite]

    @extend_schema(parameters=PAGE_PARAMETERS, responses={200: ClusterSerializer(many=True)})
    def get(self, request):
        return paginated(request, selectors.cluster_list(), ClusterSerializer)

    @extend_schema(request=ClusterSerializer, responses={201: ClusterSerializer})
    @idempotent
    def post(self, request):
        data = ClusterSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        cluster = services.cluster_create(actor=request.user, **data.validated_data)
        return Response(ClusterSerializer(cluster).data, status=status.HTTP_201_CREATED)


class ClusterDetailApi(APIView):
    """GET, PATCH /api/v1/clusters/{name}/."""

    permission_classes = [ReleaseManagersWrite]

    @extend_schema(responses={200: ClusterSerializer})
    def get(self, request, name):
        return Response(ClusterSerializer(_cluster_or_404(name)).data)

    @extend_schema(request=ClusterSerializer, responses={200: ClusterSerializer})
    def patch(self, request, name):
        cluster = _cluster_or_404(name)
        data = ClusterSerializer(cluster, data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        fields = {k: v for k, v in data.validated_data.items() if k != "name"}
        services.cluster_update(cluster=cluster, actor=request.user, **fields)
        return Response(ClusterSerializer(selectors.cluster_get(name=name)).data)


class NodeListCreateApi(APIView):
    """GET, POST /api/v1/clusters/{name}/nodes/."""

    permission_classes = [ReleaseManagersWrite]

    @extend_schema(parameters=PAGE_PARAMETERS, responses={200: NodeSerializer(many=True)})
    def get(self, request, name):
        return paginated(request, _cluster_or_404(name).nodes.all(), NodeSerializer)

    @extend_schema(request=NodeSerializer, responses={201: NodeSerializer})
    @idempotent
    def post(self, request, name):
        cluster = _cluster_or_404(name)
        data = NodeSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        node = services.node_create(cluster=cluster, actor=request.user, **data.validated_data)
        return Response(NodeSerializer(node).data, status=status.HTTP_201_CREATED)


class NodeDetailApi(APIView):
    """GET, PATCH (its price), DELETE /api/v1/clusters/{name}/nodes/{node}/ (delete keeps
    the node's history)."""

    permission_classes = [ReleaseManagersWrite]

    def _node(self, name: str, node: str):
        found = _cluster_or_404(name).nodes.filter(name=node).first()
        if found is None:
            raise Http404(f"Cluster {name} has no node named '{node}'.")
        return found

    @extend_schema(responses={200: NodeSerializer})
    def get(self, request, name, node):
        return Response(NodeSerializer(self._node(name, node)).data)

    @extend_schema(request=NodePriceSerializer, responses={200: NodeSerializer})
    def patch(self, request, name, node):
        found = self._node(name, node)
        data = NodePriceSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        prices.price_change(obj=found, actor=request.user, **data.validated_data)
        return Response(NodeSerializer(found).data)

    @extend_schema(responses={204: None})
    def delete(self, request, name, node):
        services.node_remove(node=self._node(name, node), actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class PriceFilters(inputs.ChoicesListed):
    node = serializers.CharField(
        required=False, allow_blank=True, help_text="one node's ('' for the cluster's own)"
    )


class PriceHistoryApi(APIView):
    """GET /api/v1/clusters/{name}/prices/: every price change of the cluster and its nodes."""

    permission_classes = [ReleaseManagersWrite]

    @extend_schema(
        parameters=[PriceFilters, *PAGE_PARAMETERS],
        responses={200: PriceChangeSerializer(many=True)},
    )
    def get(self, request, name):
        cluster = _cluster_or_404(name)
        filters = PriceFilters(data=request.query_params)
        filters.is_valid(raise_exception=True)
        history = prices.price_history(cluster=cluster, node=filters.validated_data.get("node"))
        return paginated(request, history, PriceChangeSerializer)


class NodeStatusSerializer(serializers.Serializer):
    name = serializers.CharField()
    http_url = serializers.CharField()
    reachable = serializers.BooleanField()
    health = serializers.ChoiceField(choices=["up", "down", "unknown"])
    server_version = serializers.CharField(required=False)
    error = serializers.CharField(required=False)
    loaded = serializers.DictField(child=serializers.ListField(child=serializers.IntegerField()))
    drift = serializers.DictField(child=serializers.DictField())


class ClusterStatusSerializer(serializers.Serializer):
    cluster = serializers.CharField()
    desired = serializers.DictField(child=serializers.ListField(child=serializers.IntegerField()))
    nodes = NodeStatusSerializer(many=True)
    checked_at = serializers.DateTimeField(
        allow_null=True, help_text="When the nodes were asked (every node at once)."
    )
    is_stale = serializers.BooleanField(
        help_text="The reading is older than SWITCHYARD_CLUSTER_STATUS_STALE_S."
    )


DEPLOYMENT = Lifecycle(
    states=tuple(Deployment.Status.values),
    outcomes={"succeeded": "succeeded", "failed": "failed"},
    state_of=lambda deployment: deployment.status,
    reason_of=lambda deployment: deployment.error or _done(deployment),
)


def _done(deployment) -> str:
    versions = ", ".join(str(v) for v in deployment.target_versions or []) or "none"
    return f"every node of the cluster serves the target versions ({versions})"


def _waits_for_field() -> serializers.ListField:
    return serializers.ListField(
        child=serializers.IntegerField(),
        source="waits_for_ids",
        read_only=True,
        help_text="Deployments that must succeed before this one runs: what its version "
        "calls (an ensemble's steps, a BLS model's declared calls) where it served nothing on "
        "the cluster, deployed first; for an unload with_callers, the callers' unloads.",
    )


class DeploymentAcceptedSerializer(serializers.Serializer):
    """202 of a queued deployment or unload: GET /api/v1/deployments/{id}/?wait=60 follows it."""

    id = serializers.IntegerField()
    state = DEPLOYMENT.state_field()
    finished = DEPLOYMENT.finished_field()
    outcome = DEPLOYMENT.outcome_field()
    outcome_reason = DEPLOYMENT.outcome_reason_field()
    status = serializers.ChoiceField(
        choices=DEPLOYMENT.states, help_text="Deprecated (API 2.0.0): read `state`."
    )
    waits_for = _waits_for_field()


class ClusterStatusApi(APIView):
    """GET /api/v1/clusters/{name}/status/: per-node state and drift from a reading at most
    SWITCHYARD_CLUSTER_STATUS_REFRESH_S old (deployments/node_status.py)."""

    @extend_schema(responses={200: ClusterStatusSerializer})
    def get(self, request, name):
        max_age_s = settings.SWITCHYARD_CLUSTER_STATUS_REFRESH_S
        status = node_status.cluster_status_read(cluster=_cluster_or_404(name), max_age_s=max_age_s)
        return Response(status)


NODE_STATUSES = tuple(DeploymentNode.Status.values)


class DeploymentNodeSerializer(serializers.Serializer):
    node = serializers.CharField(source="node_name")
    status = serializers.ChoiceField(choices=NODE_STATUSES)
    load_ms = serializers.FloatField(allow_null=True)
    warmup_ms = serializers.FloatField(allow_null=True)
    error = serializers.CharField()
    updated_at = serializers.DateTimeField()


class DeploymentSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.ChoiceField(choices=Deployment.Kind.values)
    state = DEPLOYMENT.state_field()
    finished = DEPLOYMENT.finished_field()
    outcome = DEPLOYMENT.outcome_field()
    outcome_reason = DEPLOYMENT.outcome_reason_field()
    status = serializers.ChoiceField(
        choices=DEPLOYMENT.states, help_text="Deprecated (API 2.0.0): read `state`."
    )
    cluster = serializers.CharField(source="cluster.name")
    model = serializers.CharField(source="model.name")
    version = serializers.IntegerField(source="version.version", default=None, allow_null=True)
    previous_versions = serializers.ListField(child=serializers.IntegerField())
    target_versions = serializers.ListField(child=serializers.IntegerField())
    error = serializers.CharField()
    requested_by = serializers.CharField(
        source="requested_by.username", default=None, allow_null=True
    )
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    nodes = DeploymentNodeSerializer(many=True)
    waits_for = _waits_for_field()


class DeploymentFilters(ListFilters):
    state = serializers.ChoiceField(choices=Deployment.Status.values, required=False)


class DeploymentCreateApi(APIView):
    """GET (filtered, paged) and POST /api/v1/deployments/ {"cluster","model","version"} -> 202."""

    permission_classes = [ReleaseManagersWrite]

    @extend_schema(
        parameters=[DeploymentFilters, *PAGE_PARAMETERS],
        responses={200: DeploymentSerializer(many=True)},
    )
    def get(self, request):
        deployments = selectors.deployment_list(**list_filters(request, DeploymentFilters))
        return paginated(request, deployments, DeploymentSerializer)

    class InputSerializer(inputs.InputSerializer):
        cluster = serializers.CharField()
        model = serializers.CharField()
        version = serializers.IntegerField(min_value=1)

    @extend_schema(request=InputSerializer, responses={202: DeploymentAcceptedSerializer})
    @idempotent
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        body = data.validated_data
        cluster = selectors.cluster_get(name=body["cluster"])
        version = model_version_find(model_name=body["model"], version=body["version"])
        if cluster is None:
            raise NotFound(f"No cluster named '{body['cluster']}'.", field="cluster")
        if version is None:
            message = f"Model '{body['model']}' has no version {body['version']}."
            raise NotFound(message, field="version")
        deployment = services.deployment_create(
            cluster=cluster, version=version, actor=request.user
        )
        return Response(
            DeploymentAcceptedSerializer(deployment).data, status=status.HTTP_202_ACCEPTED
        )


class DeploymentDetailApi(APIView):
    """GET /api/v1/deployments/{id}/[?wait=s]: state, per-node outcome and timings."""

    @extend_schema(parameters=[WAIT_PARAMETER], responses={200: DeploymentSerializer})
    def get(self, request, deployment_id):
        deployment = selectors.deployment_get(deployment_id=deployment_id)
        if deployment is None:
            raise Http404(f"No deployment {deployment_id}.")
        return Response(DeploymentSerializer(deployment).data)


def _deployment_finished(*, deployment_id: int) -> bool:
    found = selectors.deployment_get(deployment_id=deployment_id)
    return found is None or DEPLOYMENT.finished(found)


deployment_detail = long_poll(
    DeploymentDetailApi,
    groups=lambda deployment_id: [group_name("deployment", deployment_id)],
    finished=_deployment_finished,
)


class ModelUnloadApi(APIView):
    """POST /api/v1/clusters/{name}/models/{model}/unload/ -> 202."""

    permission_classes = [ReleaseManagersWrite]

    class InputSerializer(inputs.InputSerializer):
        with_callers = serializers.BooleanField(
            required=False,
            default=False,
            help_text="Unload the models serving on the cluster that call this one (ensembles, "
            "BLS models) first, each an unload of its own that the next waits for (the "
            "answer's `waits_for`); without it, such callers make it a 409 naming them.",
        )

    @extend_schema(request=InputSerializer, responses={202: DeploymentAcceptedSerializer})
    @idempotent
    def post(self, request, name, model):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        cluster = _cluster_or_404(name)
        found = Model.objects.filter(name=model).first()
        if found is None:
            raise Http404(f"No model named '{model}'.")
        deployment = services.deployment_create(
            cluster=cluster,
            version=None,
            model=found,
            actor=request.user,
            with_callers=data.validated_data["with_callers"],
        )
        return Response(
            DeploymentAcceptedSerializer(deployment).data, status=status.HTTP_202_ACCEPTED
        )
