"""Kubernetes manifests (deploy/k8s): every resource validates offline against the
Kubernetes API of a named release, and the overlays, rendered by kustomize (kubectl's),
hold the properties operators rely on."""

import shutil
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
# The oldest Kubernetes release the manifests promise to work with (docs/operations.md).
KUBERNETES_VERSION = "1.30.0"
OVERLAYS = ["staging", "production"]


def resources_in(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def render(overlay: str) -> list[dict]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl (with its built-in kustomize) is not installed")
    out = subprocess.run(
        [kubectl, "kustomize", str(K8S / "overlays" / overlay)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def by_kind(resources: list[dict], kind: str) -> dict[str, dict]:
    return {r["metadata"]["name"]: r for r in resources if r["kind"] == kind}


@pytest.mark.parametrize("folder", ["base", "triton"])
def test_every_resource_file_validates_strictly_against_the_kubernetes_api(folder):
    files = [f for f in sorted((K8S / folder).glob("*.yaml")) if f.name != "kustomization.yaml"]
    assert files
    for file in files:
        for resource in resources_in(file):
            kubernetes_validate.validate(resource, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_overlay_renders_and_validates(overlay):
    resources = render(overlay)
    for resource in resources:
        kubernetes_validate.validate(resource, KUBERNETES_VERSION, strict=True)
    namespaced = [r for r in resources if r["kind"] != "Namespace"]
    (namespace,) = by_kind(resources, "Namespace")
    assert {r["metadata"].get("namespace") for r in namespaced} == {namespace}
    images = {
        c["image"]
        for d in by_kind(resources, "Deployment").values()
        for c in d["spec"]["template"]["spec"]["containers"]
    }
    assert all("/" in image and ":" in image for image in images), images  # overlays pin them


def test_control_plane_has_one_beat_probes_budgets_and_requests():
    resources = render("production")
    deployments = by_kind(resources, "Deployment")
    beat = deployments["switchyard-beat"]["spec"]
    assert beat["replicas"] == 1 and beat["strategy"]["type"] == "Recreate"
    assert deployments["switchyard-web"]["spec"]["replicas"] == 3
    (web,) = deployments["switchyard-web"]["spec"]["template"]["spec"]["containers"]
    assert web["readinessProbe"]["httpGet"]["path"] == "/healthz"
    kinds = {"switchyard-web", "switchyard-worker", "switchyard-beat", "switchyard-collector"}
    assert kinds <= set(deployments)
    for deployment in deployments.values():
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            assert container["resources"]["requests"], deployment["metadata"]["name"]
    budgets = by_kind(resources, "PodDisruptionBudget")
    assert {"switchyard-web", "triton"} <= set(budgets)
    assert {"switchyard-web", "switchyard-router"} <= set(by_kind(resources, "Service"))
    assert by_kind(resources, "Ingress")["switchyard"]["spec"]["tls"]


def test_triton_nodes_register_drain_scale_on_queue_time_and_share_a_repository():
    resources = render("production")
    triton = by_kind(resources, "Deployment")["triton"]["spec"]["template"]["spec"]
    (container,) = triton["containers"]
    assert "--model-control-mode=explicit" in container["args"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/v2/models/risk_score/ready"
    assert container["lifecycle"]["preStop"]["exec"]["command"] == ["sh", "/hooks/drain.sh"]
    hooks = by_kind(resources, "ConfigMap")["triton-node-hooks"]["data"]
    assert "-X DELETE" in hooks["drain.sh"] and "/nodes/$HOSTNAME/" in hooks["drain.sh"]
    assert '"http_url":"http://%s:8000"' in hooks["register.sh"]  # an explicit port
    hpa = by_kind(resources, "HorizontalPodAutoscaler")["triton"]["spec"]
    assert hpa["metrics"][0]["pods"]["metric"]["name"] == "triton_queue_time_per_request_seconds"
    adapter = by_kind(resources, "ConfigMap")["triton-prometheus-adapter-rules"]["data"]
    (rule,) = yaml.safe_load(adapter["config.yaml"])["rules"]
    assert rule["name"]["as"] == "triton_queue_time_per_request_seconds"
    assert "nv_inference_queue_duration_us" in rule["metricsQuery"]
    claims = by_kind(resources, "PersistentVolumeClaim")
    assert claims["triton-models"]["spec"]["accessModes"] == ["ReadWriteMany"]
    worker = by_kind(resources, "Deployment")["switchyard-worker"]["spec"]["template"]["spec"]
    assert {"name": "models", "persistentVolumeClaim": {"claimName": "triton-models"}} in worker[
        "volumes"
    ]


def test_a_broken_manifest_is_refused():
    bad = resources_in(K8S / "base" / "beat.yaml")[0]
    bad["spec"]["replicas"] = "one"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, KUBERNETES_VERSION, strict=True)
