"""docker-compose.yml: Debian's docker-compose accepts it offline, and it holds what an
install beside a fleet needs (production settings, secrets required, health checks,
volumes, overridable images, one beat, CPU and GPU node profiles)."""

import importlib.util
import ipaddress
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SECRETS = {"DJANGO_SECRET_KEY": "k" * 50, "POSTGRES_PASSWORD": "pw", "REDIS_PASSWORD": "rpw"}


def compose(*args: str, **env: str) -> subprocess.CompletedProcess:
    binary = shutil.which("docker-compose")
    if binary is None:
        pytest.skip("Debian's docker-compose is not installed (scripts/setup_system.sh does)")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "POSTGRES_"))}
    stand_in = str(ROOT / "deploy/compose/env.example")  # any file: config only checks it is
    clean.update(SWITCHYARD_METRICS_TOKEN_PATH=stand_in, SWITCHYARD_NODE_KEY_PATH=stand_in)
    clean.update(env)
    return subprocess.run(
        [binary, "-f", str(ROOT / "docker-compose.yml"), *args],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_docker_compose_config_accepts_the_file_and_requires_the_secrets():
    ok = compose("config", "-q", **SECRETS)
    assert ok.returncode == 0, ok.stderr
    missing = compose("config", "-q", POSTGRES_PASSWORD="pw", REDIS_PASSWORD="rpw")
    assert missing.returncode != 0 and "set DJANGO_SECRET_KEY in .env" in missing.stderr
    no_redis = {k: v for k, v in SECRETS.items() if k != "REDIS_PASSWORD"}
    missing = compose("config", "-q", **no_redis)
    assert missing.returncode != 0 and "set REDIS_PASSWORD in .env" in missing.stderr


def test_compose_runs_every_process_kind_with_production_settings():
    config = yaml.safe_load(compose("config", **SECRETS, SWITCHYARD_IMAGE="local/cp:1").stdout)
    services = config["services"]
    for name in ("web", "worker", "beat", "collector"):
        env = services[name]["environment"]
        assert services[name]["image"] == "local/cp:1"
        assert env["DJANGO_SETTINGS_MODULE"] == "controlplane.settings.prod"
        assert env["DJANGO_SECRET_KEY"] == SECRETS["DJANGO_SECRET_KEY"]
        assert env["DATABASE_URL"] == "postgres://switchyard:pw@postgres:5432/switchyard"
        assert env["DJANGO_ALLOWED_HOSTS"]
    assert "beat" in services["beat"]["command"] and "deploy" not in services["beat"]
    kinds = {name: services[name]["command"][0] for name in ("web", "worker", "collector")}
    assert kinds == {"web": "web", "worker": "worker", "collector": "collector"}
    for name in ("postgres", "redis", "web", "triton-1", "triton-2", "triton-gpu-1"):
        assert services[name]["healthcheck"]["test"], name
    volumes = {"pgdata", "artifacts", "models-1", "models-2", "routers", "prometheus"}
    assert volumes <= set(config["volumes"])
    assert services["triton-1"]["profiles"] == ["cpu"]
    assert services["triton-gpu-1"]["profiles"] == ["gpu"]
    assert services["triton-gpu-1"]["image"].startswith("nvcr.io/nvidia/tritonserver:")


def test_every_image_name_can_be_overridden():
    names = ["SWITCHYARD", "POSTGRES", "REDIS", "PROMETHEUS", "TRITON_CPU", "TRITON_GPU"]
    overrides = {f"{n}_IMAGE": f"localhost/{n.lower()}:test" for n in names}
    config = yaml.safe_load(compose("config", **SECRETS, **overrides).stdout)
    images = {s["image"] for s in config["services"].values()}
    assert images == set(overrides.values())


CONTROL_PLANE = ("web", "worker", "worker-long", "beat", "collector")
NODES = ("triton-1", "triton-2", "triton-gpu-1", "triton-gpu-2")
# What calls the nodes, so joins their network: pages and pushes, the router, scrapes.
NODE_CALLERS = ("web", "worker", "worker-long", "collector", "prometheus")
RESTRICTED = "--http-restricted-api=model-repository,shared-memory,trace,logging:"


def rendered() -> dict:
    return yaml.safe_load(compose("config", **SECRETS, COMPOSE_PROFILES="cpu,gpu").stdout)


def test_redis_asks_for_a_password_in_protected_mode_and_every_url_carries_it():
    services = rendered()["services"]
    redis = services["redis"]
    command = " ".join(redis["command"])
    assert "--protected-mode yes" in command and '--requirepass "$$REDISCLI_AUTH"' in command
    assert redis["environment"]["REDISCLI_AUTH"] == SECRETS["REDIS_PASSWORD"]
    for name in CONTROL_PLANE:
        env = services[name]["environment"]
        assert env["REDIS_URL"] == "redis://:rpw@redis:6379/0", name
        for url in ("CELERY_BROKER_URL", "CELERY_RESULT_BACKEND"):  # default to REDIS_URL
            assert url not in env or ":rpw@" in env[url], (name, url)


def test_each_node_is_on_a_network_of_its_own_apart_from_postgres_and_redis():
    config = rendered()
    services, networks = config["services"], config["networks"]
    node_networks = {"triton-1": "data-1", "triton-2": "data-2"}
    subnets = {}
    for network in node_networks.values():
        assert networks[network]["internal"] is True  # no gateway: nothing routed off it
        subnets[network] = networks[network]["ipam"]["config"][0]["subnet"]
    assert len(set(subnets.values())) == 2  # two subnets: no node reaches the other
    assert set(services["postgres"]["networks"]) == {"control"}
    assert set(services["redis"]["networks"]) == {"control"}
    addresses, volumes = {}, {}
    for name in NODES:
        node, network = services[name], node_networks[name.replace("-gpu", "")]
        assert set(node["networks"]) == {network} and "ports" not in node, name
        addresses[name] = node["networks"][network]["ipv4_address"]
        volumes[name] = {v.split(":", 1)[0] for v in node["volumes"]}
        assert ipaddress.ip_address(addresses[name]) in ipaddress.ip_network(subnets[network])
    assert volumes["triton-1"] == volumes["triton-gpu-1"] == {"models-1"}  # no shared folder
    assert volumes["triton-2"] == volumes["triton-gpu-2"] == {"models-2"}
    for name in NODE_CALLERS:
        assert set(services[name]["networks"]) == {"control", "data-1", "data-2"}, name
        hosts = dict(h.split(":") for h in services[name]["extra_hosts"])
        assert hosts["triton-1.switchyard.internal"] == addresses["triton-1"], name
        assert hosts["triton-2.switchyard.internal"] == addresses["triton-2"], name
    assert set(services["beat"]["networks"]) == {"control"}
    # Ports are published from the control network only (never onto the internal one).
    published = {name for name, service in services.items() if service.get("ports")}
    assert published == {"front"} and set(services["front"]["networks"]) == {"control"}
    targets = {str(p).rsplit(":", 1)[-1].split("/")[0] for p in services["front"]["ports"]}
    assert targets == {"8000", "8080", "9090"}
    # The web process reads nodes live but does not listen on their network.
    for name in NODE_CALLERS[:-1]:  # the control plane's: it may call every node's network
        allowed = services[name]["environment"]["SWITCHYARD_ALLOWED_TARGET_NETWORKS"]
        assert set(subnets.values()) <= set(allowed.split(",")), name
    unlistened = services["web"]["environment"]["SWITCHYARD_WEB_UNLISTENED_NETWORKS"]
    assert unlistened.split(",") == [subnets["data-1"], subnets["data-2"]]
    assert services["worker"]["networks"]["control"]["aliases"] == ["router"]


def test_nodes_run_the_restricted_apis_and_hold_no_switchyard_credential():
    services = rendered()["services"]
    credentials = {"DJANGO_SECRET_KEY", "DATABASE_URL", "REDIS_URL", "POSTGRES_PASSWORD"}
    for name in NODES:
        node = services[name]
        assert not credentials & set(node.get("environment") or {}), name
        assert [s["source"] for s in node["secrets"]] == ["node_key"], name
        assert not any("artifacts" in v or "routers" in v for v in node["volumes"]), name
    for name in ("triton-1", "triton-2"):
        env = services[name]["environment"]
        assert env["TRITON_NODE_KEY_FILE"] == "/run/secrets/node_key"
        assert env["TRITON_RESTRICTED_APIS"] == "model-repository,shared-memory,trace,logging"
    script = (ROOT / "deploy/containers/triton-node.sh").read_text()
    assert '--http-restricted-api="$restricted:switchyard-node-key=$key"' in script
    assert '--grpc-restricted-protocol="$restricted:switchyard-node-key=$key"' in script
    for name in ("triton-gpu-1", "triton-gpu-2"):
        command = " ".join(services[name]["command"])
        assert RESTRICTED + "switchyard-node-key=$$key" in command, name
        assert "--grpc-restricted-protocol=model-repository," in command, name
    for name in CONTROL_PLANE:  # the control plane holds the key to send it
        assert "node_key" in [s["source"] for s in services[name]["secrets"]], name


def test_a_node_without_its_key_refuses_to_start(tmp_path):
    script = ROOT / "deploy/containers/triton-node.sh"
    for content in (None, "", "has space"):
        key = tmp_path / "node_key"
        if content is not None:
            key.write_text(content)
        done = subprocess.run(
            ["sh", str(script)],
            env={"PATH": os.environ["PATH"], "TRITON_NODE_KEY_FILE": str(key)},
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.returncode == 64 and "holds no node key" in done.stderr, content


def test_the_web_process_listens_outside_the_networks_it_is_told_to_leave():
    spec = importlib.util.spec_from_file_location(
        "web_endpoints", ROOT / "deploy/containers/web_endpoints.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    own = module.own_ipv4_addresses()
    assert "127.0.0.1" in own
    everywhere = module.endpoints(8000, [])
    assert everywhere == sorted(f"tcp:port=8000:interface={a}" for a in set(own))
    assert module.endpoints(8000, ["0.0.0.0/0"]) == ["tcp:port=8000:interface=127.0.0.1"]


def test_the_front_proxy_sets_the_client_address_the_control_plane_trusts_one_hop():
    services = rendered()["services"]
    for name in CONTROL_PLANE:
        env = services[name]["environment"]
        assert env["SWITCHYARD_CLIENT_IP_HEADER"] == "HTTP_X_FORWARDED_FOR", name
        assert env["SWITCHYARD_PROXY_COUNT"] == "1", name
    conf = (ROOT / "deploy/containers/front-nginx.conf").read_text()
    assert "proxy_set_header X-Forwarded-For $remote_addr;" in conf  # overwritten, one hop
    assert services["front"]["environment"]["SWITCHYARD_FRONT_FORWARDS"] == (
        "8080=router:8080,9090=prometheus:9090"
    )
