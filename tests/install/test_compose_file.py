"""docker-compose.yml: Debian's docker-compose accepts it offline, and it holds what an
install beside a fleet needs (production settings, secrets required, health checks,
volumes, overridable images, one beat, CPU and GPU node profiles)."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SECRETS = {"DJANGO_SECRET_KEY": "k" * 50, "POSTGRES_PASSWORD": "pw"}


def compose(*args: str, **env: str) -> subprocess.CompletedProcess:
    binary = shutil.which("docker-compose")
    if binary is None:
        pytest.skip("Debian's docker-compose is not installed (scripts/setup_system.sh does)")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "POSTGRES_"))}
    clean.update(SWITCHYARD_METRICS_TOKEN_PATH=str(ROOT / "deploy/compose/env.example"), **env)
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
    missing = compose("config", "-q", POSTGRES_PASSWORD="pw")
    assert missing.returncode != 0 and "set DJANGO_SECRET_KEY in .env" in missing.stderr


def test_compose_runs_every_process_kind_with_production_settings():
    config = yaml.safe_load(compose("config", **SECRETS, SWITCHYARD_IMAGE="local/cp:1").stdout)
    services = config["services"]
    for name in ("web", "worker", "beat", "collector"):
        env = services[name]["environment"]
        assert services[name]["image"] == "local/cp:1"
        assert env["DJANGO_SETTINGS_MODULE"] == "controlplane.settings.prod"
        assert env["DJANGO_SECRET_KEY"] == SECRETS["DJANGO_SECRET_KEY"]
        assert env["DATABASE_URL"] == "postgres://switchyard:pw@postgres:5432/switchyard"
        assert env["REDIS_URL"] and env["DJANGO_ALLOWED_HOSTS"]
    assert "beat" in services["beat"]["command"] and "deploy" not in services["beat"]
    kinds = {name: services[name]["command"][0] for name in ("web", "worker", "collector")}
    assert kinds == {"web": "web", "worker": "worker", "collector": "collector"}
    for name in ("postgres", "redis", "web", "triton-1", "triton-2", "triton-gpu-1"):
        assert services[name]["healthcheck"]["test"], name
    assert {"pgdata", "artifacts", "models", "routers", "prometheus"} <= set(config["volumes"])
    assert services["triton-1"]["profiles"] == ["cpu"]
    assert services["triton-gpu-1"]["profiles"] == ["gpu"]
    assert services["triton-gpu-1"]["image"].startswith("nvcr.io/nvidia/tritonserver:")


def test_every_image_name_can_be_overridden():
    names = ["SWITCHYARD", "POSTGRES", "REDIS", "PROMETHEUS", "TRITON_CPU", "TRITON_GPU"]
    overrides = {f"{n}_IMAGE": f"localhost/{n.lower()}:test" for n in names}
    config = yaml.safe_load(compose("config", **SECRETS, **overrides).stdout)
    images = {s["image"] for s in config["services"].values()}
    assert images == set(overrides.values())
