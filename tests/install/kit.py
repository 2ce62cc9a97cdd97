"""The compose kit under test: podman set up as measured on these machines, images built
once and cached by a hash of their inputs, one compose project brought up and torn down.

No registry is reachable here: the base image is a Debian root file system made with
debootstrap and imported into podman, and PostgreSQL, Redis and Prometheus come from
stand-in images built on it (deploy/containers/support/).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
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


def image_id(tag: str) -> str:
    return run(["podman", "image", "inspect", "--format", "{{.Id}}", tag]).stdout.strip()


def image_layers(tag: str) -> list[str]:
    done = run(["podman", "image", "inspect", "--format", "{{json .RootFS.Layers}}", tag])
    return json.loads(done.stdout)


def tracked_files(paths: list[str]) -> list[str]:
    """The tracked and new (not ignored) files under `paths` that go into an image."""
    listed = run(
        ["git", "ls-files", "-co", "--exclude-standard", "--", *paths],
        env=dict(os.environ),
        cwd=ROOT,
    ).stdout.split()
    return sorted(n for n in listed if not n.startswith(NOT_IN_IMAGES) and (ROOT / n).is_file())


def files(paths: list[str]) -> list[tuple[str, bytes]]:
    """(name, content) of the files under `paths` that go into an image."""
    return [(name, (ROOT / name).read_bytes()) for name in tracked_files(paths)]


def content_hash(parts: list[tuple[str, bytes]]) -> str:
    """sha256 over (name, content) pairs, in the order given."""
    digest = hashlib.sha256()
    for name, data in parts:
        digest.update(name.encode() + b"\0" + data + b"\0")
    return digest.hexdigest()[:16]


def inputs_hash(paths: list[str]) -> str:
    """sha256 over the names and contents of the tracked and new files under `paths`."""
    return content_hash(files(paths))


def requirement_lines(pattern: str) -> bytes:
    """The lines of requirements.txt matching `pattern` (what an image installs of it)."""
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    return "\n".join(line for line in lines if re.match(pattern, line)).encode()


@dataclass(frozen=True)
class ImageSpec:
    """An image and what it contains: its tag is the hash of that content and of the base
    image, so each content is built once on a machine and reused by every later run."""

    name: str
    containerfile: str
    contents: Callable[[], list[tuple[str, bytes]]]
    target: str = ""  # a stage of the Containerfile, for an image that is one stage

    def tag(self) -> str:
        base = [("base image", image_id(BASE_IMAGE).encode())]
        return f"localhost/switchyard-kit-{self.name}:{content_hash(base + self.contents())}"


# Builds of one image kept on the machine (the newest; each has its own content hash).
KEEP_TAGS = 4
CONTROLPLANE_FILE = "deploy/containers/controlplane.Containerfile"
# The line that starts the control plane's code stage; above it is the runtime stage
# (system packages, the venv with the runtime pins, Bootstrap), an image of its own here.
CODE_STAGE = "FROM runtime\n"


def _controlplane_runtime() -> list[tuple[str, bytes]]:
    """The runtime stage's instructions and the files it copies (requirements.txt whole:
    buildah's layer cache keys the COPY on the whole file, package.json, package-lock.json)."""
    text = (ROOT / CONTROLPLANE_FILE).read_text()
    if CODE_STAGE not in text:
        raise KitError(f"{CONTROLPLANE_FILE} has no line {CODE_STAGE!r}")
    stage = text.split(CODE_STAGE, 1)[0]
    return [("runtime stage", stage.encode()), *files(["requirements.txt", "package*.json"])]


RUNTIME = ImageSpec("controlplane-runtime", CONTROLPLANE_FILE, _controlplane_runtime, "runtime")
IMAGES = {
    "SWITCHYARD_IMAGE": ImageSpec(
        "controlplane",
        CONTROLPLANE_FILE,
        lambda: [("runtime", RUNTIME.tag().encode()), *files(["."])],
    ),
    "TRITON_CPU_IMAGE": ImageSpec(
        "triton-cpu",
        "deploy/containers/triton-cpu.Containerfile",
        lambda: [
            *files(
                ["deploy/containers/triton-cpu.Containerfile", "deploy/containers/triton-node.sh"]
            ),
            ("node pins", requirement_lines(r"(nvidia-pytriton|numpy|protobuf)==")),
        ],
    ),  # fmt: skip
    **{
        f"{name.upper()}_IMAGE": ImageSpec(
            name,
            f"deploy/containers/support/{name}.Containerfile",
            lambda: files(["deploy/containers/support/"]),
        )
        for name in ("postgres", "redis", "prometheus")
    },
}


def build_image(spec: ImageSpec, tag: str) -> None:
    secret = ["--secret", f"id=ca,src={CA_BUNDLE}"] if CA_BUNDLE.is_file() else []
    target = ["--target", spec.target] if spec.target else []
    run(
        ["podman", "build", "--network", "host", *secret, *target,
         "--build-arg", f"BASE_IMAGE={BASE_IMAGE}", "-f", spec.containerfile, "-t", tag, "."],
        cwd=ROOT, timeout=1500,
    )  # fmt: skip
    _remove_older_tags(tag)


def build_images() -> tuple[dict[str, str], list[str]]:
    """(compose variable -> local image tag, the tags built now): an image is built only
    when no image with its tag is on this machine. The control plane's runtime stage is an
    image of its own, built first, so a code change rebuilds only the code stage above it
    (the runtime's layers are that build's cache: checked, it fails if they were not used)."""
    ensure_base_image()
    built = []
    runtime_tag = RUNTIME.tag()
    if not image_exists(runtime_tag):
        build_image(RUNTIME, runtime_tag)
        built.append(runtime_tag)
    tags = {}
    for variable, spec in IMAGES.items():
        tag = spec.tag()
        if not image_exists(tag):
            build_image(spec, tag)
            built.append(tag)
        tags[variable] = tag
    runtime_layers = image_layers(runtime_tag)
    if image_layers(tags["SWITCHYARD_IMAGE"])[: len(runtime_layers)] != runtime_layers:
        raise KitError(f"{tags['SWITCHYARD_IMAGE']} was built without {runtime_tag}'s layers")
    return tags, built


def _remove_older_tags(tag: str, keep: int = KEEP_TAGS) -> None:
    """Drop earlier builds of the same image but the newest `keep` (the worktrees and
    branches of one machine share podman's store: each keeps its own build), their shared
    layers staying as build cache."""
    repository = tag.rpartition(":")[0]
    listed = run(
        ["podman", "images", "--format", "{{.CreatedAt}}|{{.Repository}}:{{.Tag}}", repository]
    )
    rows = sorted(
        (line.split("|", 1) for line in listed.stdout.splitlines() if "|" in line), reverse=True
    )
    older = [t for _, t in rows if t != tag and t.startswith(repository + ":")][keep - 1 :]
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
