"""Smoke validation: load a new version on one node under a temporary name, infer once with
generated inputs, record latency and output shapes in its validation report, unload."""

import json
import time
import uuid

from django.conf import settings
from django.db import transaction

from deployments import push
from deployments.models import TritonCluster, TritonNode
from deployments.validation import tensor_limits
from integrations.triton.errors import TritonError
from integrations.triton.inputs import generate_inputs
from models_registry.models import ModelVersion


def smoke_node() -> TritonNode | None:
    """The node smoke tests run on: the configured cluster, else any staging cluster's."""
    clusters = TritonCluster.objects.all()
    name = settings.SWITCHYARD_SMOKE_CLUSTER
    clusters = clusters.filter(name=name) if name else clusters.filter(environment="staging")
    return TritonNode.objects.filter(cluster__in=clusters).exclude(health="down").first()


def _run(node: TritonNode, version: ModelVersion) -> dict:
    plan = push.build_plan([version], upload=True)
    temp_name = f"{version.model.name}--smoke-{version.version}-{uuid.uuid4().hex[:6]}"
    config = json.loads(plan.config_json)
    config["name"] = temp_name
    with push.client_for(node) as client:
        start = time.perf_counter()
        client.load(temp_name, config_json=json.dumps(config), files=plan.files)
        load_ms = (time.perf_counter() - start) * 1000
        try:
            sample = generate_inputs(plan.config_dict, limits=tensor_limits())
            result = client.infer(temp_name, sample, version=version.version)
        finally:
            client.unload(temp_name)
    return {
        "passed": True,
        "node": str(node),
        "load_ms": round(load_ms, 1),
        "native_warmup": bool(plan.warmup_files),  # Triton ran the warm-up inside the load
        "latency_ms": round(result.latency_ms, 2),
        "output_shapes": {k: list(v.shape) for k, v in result.outputs.items()},
    }


def model_version_smoke_validate(*, version_id: int) -> dict | None:
    """Smoke-test a version; None when no node is available. Records the outcome."""
    version = ModelVersion.objects.select_related("model").get(pk=version_id)
    node = smoke_node()
    if node is None:
        return None
    try:
        report = _run(node, version)
    except (TritonError, push.CorruptArtifact, ValueError) as exc:
        report = {"passed": False, "node": str(node), "error": str(exc)}
    with transaction.atomic():
        locked = ModelVersion.objects.select_for_update().get(pk=version_id)
        locked.validation = {**locked.validation, "smoke": report}
        locked.status = (
            ModelVersion.Status.SMOKE_PASSED
            if report["passed"]
            else ModelVersion.Status.SMOKE_FAILED
        )
        locked.save(update_fields=["validation", "status"])
    return report
