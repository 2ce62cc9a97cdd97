"""Kubernetes manifests (deploy/k8s): every resource validates offline against the
Kubernetes API of a named release, and the overlays, rendered by kustomize (kubectl's),
hold the properties operators rely on."""

import json
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


def test_triton_nodes_are_discovered_scale_on_queue_time_and_share_a_repository():
    resources = render("production")
    triton = by_kind(resources, "Deployment")["triton"]["spec"]["template"]["spec"]
    (container,) = triton["containers"]
    assert "--model-control-mode=explicit" in " ".join(container["args"])
    assert container["readinessProbe"]["httpGet"]["path"] == "/v2/models/risk_score/ready"
    assert container["lifecycle"] == {"preStop": {"exec": {"command": ["sleep", "20"]}}}
    nodes = by_kind(resources, "Service")["triton-nodes"]["spec"]
    assert nodes["clusterIP"] == "None" and nodes["publishNotReadyAddresses"] is True
    assert nodes["selector"]["app.kubernetes.io/name"] == "triton"
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
    assert {"name": "models", "mountPath": "/models", "readOnly": True} in container["volumeMounts"]


CONTROL_PLANE_SECRETS = {"switchyard-secrets", "switchyard-config"}
# What calls the nodes (worker: the router too); the collector and Prometheus scrape metrics.
NODE_CALLERS = {"switchyard-web", "switchyard-worker", "switchyard-worker-long"}
RESTRICTED = "model-repository,shared-memory,trace,logging:switchyard-node-key="


def pods(resources: list[dict]) -> dict[str, dict]:
    """Workload name -> its pod template (Deployments and Jobs)."""
    kinds = ("Deployment", "Job")
    return {r["metadata"]["name"]: r["spec"]["template"] for r in resources if r["kind"] in kinds}


def selects(selector: dict, labels: dict) -> bool:
    """Kubernetes' label selector semantics (matchLabels and In / NotIn / Exists)."""
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for rule in selector.get("matchExpressions", []):
        value, op = labels.get(rule["key"]), rule["operator"]
        if op == "In" and value not in rule["values"]:
            return False
        if op == "NotIn" and value in rule["values"]:
            return False
        if op == "Exists" and rule["key"] not in labels:
            return False
    return True


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_no_switchyard_credential_in_a_triton_pod(overlay):
    resources = render(overlay)
    assert "triton-node-hooks" not in by_kind(resources, "ConfigMap")
    pod = pods(resources)["triton"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert "SWITCHYARD_TOKEN" not in yaml.safe_dump(pod)
    (container,) = pod["containers"]
    assert "envFrom" not in container and "postStart" not in container.get("lifecycle", {})
    for env in container.get("env", []):
        assert "secretKeyRef" not in env.get("valueFrom", {}), env
        assert "configMapKeyRef" not in env.get("valueFrom", {}), env
    secrets = [v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v]
    assert secrets == ["triton-node-key"]
    assert not [v for v in pod["volumes"] if v.get("configMap") or v.get("projected")]
    command = " ".join(container.get("command", []) + container.get("args", []))
    if overlay == "production":  # NVIDIA's image: the flags on tritonserver's command line
        assert f"--http-restricted-api={RESTRICTED}$key" in command
        assert f"--grpc-restricted-protocol={RESTRICTED}$key" in command
    else:  # deploy/containers/triton-node.sh adds them from the key file
        key_file = {"name": "TRITON_NODE_KEY_FILE", "value": "/run/secrets/switchyard/node_key"}
        assert key_file in container["env"]
    for name, template in pods(resources).items():
        if name in NODE_CALLERS:  # the control plane holds the key to send it
            volumes = template["spec"]["volumes"]
            assert any(v.get("secret", {}).get("secretName") == "triton-node-key" for v in volumes)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_a_network_policy_selects_every_components_pods_behind_a_default_deny(overlay):
    resources = render(overlay)
    policies = by_kind(resources, "NetworkPolicy")
    deny = policies["switchyard-default-deny"]["spec"]
    assert deny["podSelector"] == {} and set(deny["policyTypes"]) == {"Ingress", "Egress"}
    assert "ingress" not in deny and "egress" not in deny
    workloads = pods(resources)
    assert {"switchyard-web", "switchyard-worker", "switchyard-worker-long", "switchyard-beat",
            "switchyard-collector", "switchyard-migrate", "triton"} <= set(workloads)  # fmt: skip
    for name, template in workloads.items():
        labels = template["metadata"]["labels"]
        own = [
            p for p in policies.values() if p["spec"]["podSelector"] and
            selects(p["spec"]["podSelector"], labels)
        ]  # fmt: skip
        assert len(own) == 1, (name, [p["metadata"]["name"] for p in own])
        assert set(own[0]["spec"]["policyTypes"]) == {"Ingress", "Egress"}, name


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_triton_accepts_only_the_router_and_the_control_plane_and_reaches_nothing(overlay):
    resources = render(overlay)
    workloads = pods(resources)
    triton_labels = workloads["triton"]["metadata"]["labels"]
    (policy,) = [
        p for p in by_kind(resources, "NetworkPolicy").values()
        if p["spec"]["podSelector"] and selects(p["spec"]["podSelector"], triton_labels)
    ]  # fmt: skip
    assert policy["spec"]["egress"] == []  # no route to the control plane, or anywhere
    allowed = {"switchyard-worker", "switchyard-worker-long", "switchyard-web"}
    for rule in policy["spec"]["ingress"]:
        assert rule.get("from"), "a rule without `from` admits every source"
        ports = {p["port"] for p in rule["ports"]}
        for peer in rule["from"]:
            assert "ipBlock" not in peer, peer
            if "namespaceSelector" in peer:  # Prometheus: the metrics port only
                assert "podSelector" not in peer and ports == {8002}, peer
                continue
            chosen = {
                name for name, t in workloads.items()
                if selects(peer["podSelector"], t["metadata"]["labels"])
            }  # fmt: skip
            assert chosen and "triton" not in chosen, peer
            assert chosen <= allowed | ({"switchyard-collector"} if ports == {8002} else set())
    router = by_kind(resources, "Service")["switchyard-router"]["spec"]["selector"]
    assert selects({"matchLabels": router}, workloads["switchyard-worker"]["metadata"]["labels"])


def test_the_control_plane_trusts_one_proxy_hop_and_discovers_its_nodes():
    from deployments.discovery import Discovery

    config = by_kind(render("production"), "ConfigMap")["switchyard-config"]["data"]
    assert config["SWITCHYARD_CLIENT_IP_HEADER"] == "HTTP_X_FORWARDED_FOR"
    assert config["SWITCHYARD_PROXY_COUNT"] == "1"
    ((cluster, value),) = json.loads(config["SWITCHYARD_NODE_DISCOVERY"]).items()
    assert cluster == "prod" and Discovery.parse(value) == Discovery(dns="triton-nodes")
    staging = by_kind(render("staging"), "ConfigMap")["switchyard-config"]["data"]
    assert set(json.loads(staging["SWITCHYARD_NODE_DISCOVERY"])) == {"staging"}


def test_a_broken_manifest_is_refused():
    bad = resources_in(K8S / "base" / "beat.yaml")[0]
    bad["spec"]["replicas"] = "one"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, KUBERNETES_VERSION, strict=True)
