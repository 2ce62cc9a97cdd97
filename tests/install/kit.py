"""The compose kit under test: podman set up as measured on these machines, images built
once and cached by a hash of their inputs, one compose project brought up and torn down.

No registry is reachable here: the base image is a Debian root file system made with
debootstrap and imported into podman, and PostgreSQL, Redis and Prometheus come from
stand-in images built on it (deploy/containers/support/).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KIT_DIR = ROOT / "var" / "install-kit"
BASE_IMAGE = "localhost/switchyard-base:bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
# Host CA bundle lent to image builds as a secret (a TLS-intercepting proxy's CA is in it).
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
# Mirrors .dockerignore plus what no image needs: changes there never rebuild an image.
NOT_IN_IMAGES = (
    ".git", "tests/", "docs/", "bench/", "var/", "scripts/", "README.md", "docker-compose.yml",
    "deploy/k8s/", "deploy/compose/", "deploy/prometheus/", "deploy/grafana/",
)  # fmt: skip
# podman 4.3 on these kernels: runc (crun fails on cgroup hybrid mode and on raising
# limits) and default ulimits no higher than the host's.
CONTAINERS_CONF = """[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
"""


REMOVE = {
    "containers": ["rm", "-f"],
    "pods": ["pod", "rm", "-f"],
    "networks": ["network", "rm", "-f"],
    "volumes": ["volume", "rm", "-f"],
}


class KitError(RuntimeError):
    pass


def podman_env() -> dict[str, str]:
    KIT_DIR.mkdir(parents=True, exist_ok=True)
    conf = KIT_DIR / "containers.conf"
    if not conf.exists() or conf.read_text() != CONTAINERS_CONF:
        conf.write_text(CONTAINERS_CONF)
    return {**os.environ, "CONTAINERS_CONF": str(conf)}


def run(args: list[str], *, env: dict | None = None, timeout: float = 900, check=True, **kw):
    done = subprocess.run(
        args, env=env or podman_env(), capture_output=True, text=True, timeout=timeout, **kw
    )
    if check and done.returncode != 0:
        raise KitError(
            f"{' '.join(args[:4])}... failed ({done.returncode}):\n{done.stderr[-4000:]}"
        )
    return done


def image_exists(tag: str) -> bool:
    return run(["podman", "image", "exists", tag], check=False).returncode == 0


def ensure_base_image() -> None:
    """A Debian 12 base image from the Debian archive (debootstrap minbase + podman import)."""
    if image_exists(BASE_IMAGE):
        return
    debootstrap = shutil.which("debootstrap") or "/usr/sbin/debootstrap"
    with tempfile.TemporaryDirectory(dir=KIT_DIR) as work:
        rootfs = Path(work) / "rootfs"
        run([debootstrap, "--variant=minbase", "bookworm", str(rootfs), DEBIAN_MIRROR])
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        run(["podman", "import", "-", BASE_IMAGE], stdin=tar.stdout)
        tar.wait()


def inputs_hash(paths: list[str]) -> str:
    """sha256 over the names and contents of the tracked and new files under `paths`."""
    listed = run(
        ["git", "ls-files", "-co", "--exclude-standard", "--", *paths],
        env=dict(os.environ),
        cwd=ROOT,
    ).stdout.split()
    digest = hashlib.sha256()
    for name in sorted(n for n in listed if not n.startswith(NOT_IN_IMAGES)):
        path = ROOT / name
        if path.is_file():
            digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class ImageSpec:
    name: str
    containerfile: str
    inputs: tuple[str, ...]

    def tag(self) -> str:
        return f"localhost/switchyard-kit-{self.name}:{inputs_hash(list(self.inputs))}"


IMAGES = {
    "SWITCHYARD_IMAGE": ImageSpec(
        "controlplane", "deploy/containers/controlplane.Containerfile", (".",)
    ),
    "TRITON_CPU_IMAGE": ImageSpec(
        "triton-cpu",
        "deploy/containers/triton-cpu.Containerfile",
        (
            "deploy/containers/triton-cpu.Containerfile",
            "deploy/containers/triton-node.sh",
            "requirements.txt",
        ),
    ),  # fmt: skip
    **{
        f"{name.upper()}_IMAGE": ImageSpec(
            name,
            f"deploy/containers/support/{name}.Containerfile",
            ("deploy/containers/support/",),
        )
        for name in ("postgres", "redis", "prometheus")
    },
}


def build_images() -> dict[str, str]:
    """Compose variable -> local image tag; builds only what changed since the last run."""
    ensure_base_image()
    tags = {}
    for variable, spec in IMAGES.items():
        tag = spec.tag()
        if not image_exists(tag):
            secret = ["--secret", f"id=ca,src={CA_BUNDLE}"] if CA_BUNDLE.is_file() else []
            run(
                ["podman", "build", "--network", "host", *secret,
                 "--build-arg", f"BASE_IMAGE={BASE_IMAGE}", "-f", spec.containerfile,
                 "-t", tag, "."],
                cwd=ROOT, timeout=1500,
            )  # fmt: skip
            _remove_older_tags(tag)
        tags[variable] = tag
    return tags


def _remove_older_tags(tag: str) -> None:
    """Drop earlier builds of the same image (their shared layers stay as build cache)."""
    repository = tag.rpartition(":")[0]
    listed = run(["podman", "images", "--format", "{{.Repository}}:{{.Tag}}", repository])
    older = [t for t in listed.stdout.split() if t != tag and t.startswith(repository + ":")]
    if older:
        run(["podman", "rmi", *older], check=False)


@dataclass
class Stack:
    """One compose project on free loopback ports; `down` leaves nothing behind."""

    project: str
    env: dict[str, str]
    ports: dict[str, int]
    secrets_dir: Path
    log: list[str] = field(default_factory=list)

    def compose(self, *args: str, timeout: float = 600, check: bool = True):
        podman_compose = shutil.which("podman-compose") or str(
            Path(sys.executable).parent / "podman-compose"
        )
        cmd = [podman_compose, "-p", self.project, "-f", str(ROOT / "docker-compose.yml"), *args]
        return run(cmd, env=self.env, cwd=ROOT, timeout=timeout, check=check)

    def container(self, service: str) -> str:
        out = run(
            ["podman", "ps", "--format", "{{.Names}}",
             "--filter", f"label=io.podman.compose.project={self.project}",
             "--filter", f"label=com.docker.compose.service={service}"],
        ).stdout.split()  # fmt: skip
        if not out:
            raise KitError(f"no running container for {service}")
        return out[0]

    def exec(self, service: str, *args: str, env: dict[str, str] | None = None) -> str:
        flags = [f"--env={k}={v}" for k, v in (env or {}).items()]
        return run(["podman", "exec", *flags, self.container(service), *args], timeout=120).stdout

    def save_logs(self, services: list[str]) -> Path:
        """Each service's log under var/install-kit/logs/ (kept after the stack is gone)."""
        folder = KIT_DIR / "logs"
        folder.mkdir(parents=True, exist_ok=True)
        for service in services:
            try:
                name = self.container(service)
            except KitError:
                continue
            done = run(["podman", "logs", name], check=False)
            (folder / f"{service}.log").write_text(done.stdout + done.stderr)
        return folder

    def leftovers(self) -> dict[str, list[str]]:
        """Containers, pods, networks and volumes of this project still on the machine."""
        found = {}
        label = f"label=io.podman.compose.project={self.project}"
        for kind, args in {
            "containers": ["ps", "-a", "--filter", label, "--format", "{{.Names}}"],
            "pods": ["pod", "ps", "--filter", f"name={self.project}", "--format", "{{.Name}}"],
            "networks": ["network", "ls", "--format", "{{.Name}}"],
            "volumes": ["volume", "ls", "--format", "{{.Name}}"],
        }.items():
            names = run(["podman", *args]).stdout.split()
            found[kind] = [n for n in names if kind in ("containers", "pods") or self.project in n]
        return found

    def down(self) -> None:
        self.compose("down", "-v", "-t", "10", check=False, timeout=300)
        for kind, names in self.leftovers().items():  # anything compose missed
            if not names:
                continue
            run(["podman", *REMOVE[kind], *names], check=False)


PROJECT_PREFIX = "sykit"


def remove_stale_stacks() -> None:
    """Remove what an earlier, killed test run left (its teardown never ran)."""
    listed = run(
        ["podman", "ps", "-a", "--format", '{{index .Labels "io.podman.compose.project"}}']
    )
    for project in {p for p in listed.stdout.split() if p.startswith(PROJECT_PREFIX)}:
        Stack(project=project, env=podman_env(), ports={}, secrets_dir=KIT_DIR).down()


def wait_until(predicate, *, timeout_s: float, what: str, every_s: float = 1.0):
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except Exception as exc:  # network errors while the stack comes up
            value, last = None, exc
        if value:
            return value
        time.sleep(every_s)
    raise KitError(f"{what}: not reached after {timeout_s:.0f} s (last error: {last})")
