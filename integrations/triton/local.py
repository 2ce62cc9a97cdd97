"""Start and stop real `tritonserver` processes from the installed nvidia-pytriton wheel.

Used by `manage.py triton_local`, `make demo` and the pytest session fixture. Plain Python,
no Django. Facts this relies on are in docs/TRITON.md §launcher:

* the python backend stub embeds the first `python3` on PATH (PYTHONPATH is ignored), so
  this interpreter's bin folder goes first on PATH;
* a pyenv-built Python needs its lib folder on LD_LIBRARY_PATH, or python models pick up
  the system libpython;
* the wheel ships stubs per Python version; the one matching this interpreter is copied
  into a backends folder of our own (the package's own folder stays untouched);
* given a node key, its restricted APIs (model control, shared memory, trace, logging) ask
  for it over HTTP and gRPC (restricted.py); the key is on the server's command line, never
  in its log, and is replaced by a placeholder in every message here.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from importlib import util as importlib_util
from pathlib import Path

from integrations.triton import private_tmp
from integrations.triton.private_tmp import PrivateTmp
from integrations.triton.restricted import NodeKey

LOOPBACK = "127.0.0.1"


class TritonLaunchError(RuntimeError):
    """A node could not be started; the message says what and how to fix it."""


@dataclass(frozen=True)
class TritonInstallation:
    """Where the wheel put the server binary, its backends and the python stubs."""

    root: Path

    @property
    def binary(self) -> Path:
        return self.root / "bin" / "tritonserver"

    @property
    def python_backend(self) -> Path:
        return self.root / "backends" / "python"

    @property
    def bundled_libs(self) -> Path:
        """The wheel's shared libraries (libcudart and friends) that the stub links to."""
        return self.root.parent.parent / "nvidia_pytriton.libs"

    def stub_for(self, version: str) -> Path:
        return self.root / "python_backend_stubs" / version / "triton_python_backend_stub"


def find_installation() -> TritonInstallation:
    """Locate tritonserver inside the installed nvidia-pytriton package, or explain."""
    spec = importlib_util.find_spec("pytriton")
    if spec is None or not spec.submodule_search_locations:
        raise TritonLaunchError(
            "nvidia-pytriton is not installed in this Python; run `make venv` "
            "(or `pip install -r requirements.txt`)."
        )
    root = Path(next(iter(spec.submodule_search_locations))) / "tritonserver"
    install = TritonInstallation(root)
    if not install.binary.is_file():
        raise TritonLaunchError(f"tritonserver binary not found at {install.binary}.")
    return install


def prepare_backends(install: TritonInstallation, work_dir: Path) -> Path:
    """A backends folder whose python backend has the stub for this interpreter."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    stub = install.stub_for(version)
    if not stub.is_file():
        raise TritonLaunchError(
            f"nvidia-pytriton has no python backend stub for Python {version}; "
            "use a Python it supports (3.8-3.13)."
        )
    target = work_dir / "backends" / "python"
    target.mkdir(parents=True, exist_ok=True)
    # Links, not copies: the stub and backend find their bundled libraries via $ORIGIN.
    for source in (*install.python_backend.iterdir(), stub):
        if source.is_file():
            dest = target / source.name
            if dest.is_symlink() or dest.exists():
                dest.unlink()
            dest.symlink_to(source)
    return target.parent


# Model code is untrusted (a python model's initialize() reads os.environ): tritonserver gets
# only these of the launcher's variables, never DJANGO_SECRET_KEY, DATABASE_URL, REDIS_URL,
# CELERY_* or SWITCHYARD_*. Locale and time zone are harmless; the CUDA ones pick the GPUs.
PASSED_VARIABLES = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "CUDA_VISIBLE_DEVICES")
SYSTEM_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


def server_environment(install: TritonInstallation, home: Path) -> dict[str, str]:
    """A minimal environment for tritonserver and its python stubs (an allowlist).

    PATH starts with this interpreter's bin folder (the stub embeds the first python3);
    LD_LIBRARY_PATH holds libpython's folder and the wheel's bundled libraries; HOME and
    TMPDIR are the node's own folder. Nothing else of the launcher's environment passes.
    """
    env = {name: os.environ[name] for name in PASSED_VARIABLES if name in os.environ}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), *SYSTEM_PATH])
    libdirs = [
        sysconfig.get_config_var("LIBDIR"),
        str(install.bundled_libs),
        os.environ.get("LD_LIBRARY_PATH"),
    ]
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in libdirs if p)
    tmp = home / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    env.update(HOME=str(home), TMPDIR=str(tmp))
    return env


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


def free_ports(count: int) -> list[int]:
    """`count` distinct ports the kernel says are free right now on the loopback."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((LOOPBACK, 0))
            sockets.append(sock)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


SHM_PREFIX = "/dev/shm/triton_python_backend_shm_region_"  # noqa: S108 - Triton's own names


def _shm_regions_of_group(pgid: int) -> set[str]:
    """The python backend's shared-memory files that processes of group `pgid` map now."""
    found: set[str] = set()
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if os.getpgid(int(proc.name)) != pgid:
                continue
            maps = (proc / "maps").read_text()
        except (OSError, ValueError):
            continue
        found.update(
            line.split()[-1] for line in maps.splitlines() if SHM_PREFIX in line.split()[-1]
        )
    return found


# Triton writes a model loaded by upload into a folder of its own under /tmp (this name, not
# TMPDIR), removed when the model unloads or the server exits cleanly; a killed server
# leaves it. Its python stubs name it on their command line. A node in a namespace of its
# own (private_tmp.py) writes them into its own folder instead.
UPLOAD_FOLDER = re.compile(r"^/tmp/folder[A-Za-z0-9]{6}$")  # noqa: S108 - Triton's own names


def _upload_folders_of_group(pgid: int) -> set[str]:
    """The upload folders that processes of group `pgid` (a node's python stubs) use now."""
    found: set[str] = set()
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if os.getpgid(int(proc.name)) != pgid:
                continue
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
        for arg in args:
            parts = arg.decode(errors="replace").split("/")
            folder = "/".join(parts[:3])
            if len(parts) > 3 and UPLOAD_FOLDER.match(folder):
                found.add(folder)
    return found


def _remove_upload_folders(folders: set[str]) -> None:
    """Remove the upload folders a killed node left in /tmp (a clean exit removes its own);
    one that a live process still names is kept."""
    if not folders:
        return
    in_use = set()
    for proc in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
            in_use.update(f for f in folders if f + "/" in cmdline)
    for folder in folders - in_use:
        if UPLOAD_FOLDER.match(folder):
            shutil.rmtree(folder, ignore_errors=True)


def _wait_group_gone(pgid: int, timeout_s: float = 5.0) -> None:
    """Wait until no process of group `pgid` is left (stubs die just after the server)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.05)


def _remove_unmapped(regions: set[str]) -> None:
    """Unlink the regions a stopped node left in /dev/shm (a killed server or stub never
    does); one that a live process still maps is kept."""
    if not regions:
        return
    still_mapped = set()
    for proc in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            still_mapped.update(r for r in regions if r in (proc / "maps").read_text())
    for region in regions - still_mapped:
        with contextlib.suppress(OSError):
            os.unlink(region)


def _die_with_parent() -> None:
    """In the child: start a new session and get SIGTERM if the launcher dies (Linux)."""
    os.setsid()
    if private_tmp.LIBC is not None:  # loaded before the fork: no dlopen in the child
        private_tmp.LIBC.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _child_setup(tmp: PrivateTmp):
    """The child's set-up before exec: its own session, death with the launcher, its own /tmp."""

    def setup() -> None:
        _die_with_parent()
        tmp.enter(private_tmp.LIBC)

    return setup


@dataclass
class LocalNode:
    """One running tritonserver: its ports, repository, log and process."""

    name: str
    http_port: int
    grpc_port: int
    metrics_port: int
    repository: Path
    log_path: Path
    process: subprocess.Popen | None = field(default=None, repr=False)
    # The key its restricted APIs ask for; None: an open node (anyone may load and unload).
    node_key: NodeKey | None = field(default=None, repr=False)
    # Its own /tmp while it runs in a mount namespace of its own; None: the host's /tmp.
    private_tmp: PrivateTmp | None = field(default=None, repr=False)

    @property
    def http_url(self) -> str:
        return f"http://{LOOPBACK}:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"{LOOPBACK}:{self.grpc_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://{LOOPBACK}:{self.metrics_port}/metrics"

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log written)"
        tail = "\n".join(text.splitlines()[-lines:]) or "(log is empty)"
        # A refused flag makes Triton echo it, key included.
        return self.node_key.redact(tail) if self.node_key else tail

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def is_live(self, timeout_s: float = 1.0) -> bool:
        """True when GET /v2/health/live answers 200."""
        return self._answers_200("/v2/health/live", timeout_s)

    def is_ready(self, timeout_s: float = 1.0) -> bool:
        """True when GET /v2/health/ready answers 200 (flaps during unloads: docs/TRITON.md)."""
        return self._answers_200("/v2/health/ready", timeout_s)

    def _answers_200(self, path: str, timeout_s: float) -> bool:
        conn = http.client.HTTPConnection(LOOPBACK, self.http_port, timeout=timeout_s)
        try:
            conn.request("GET", path)
            return conn.getresponse().status == 200
        except OSError:
            return False
        finally:
            conn.close()

    def upload_folders(self) -> set[str]:
        """The upload folders its python stubs use now, as paths on this side."""
        if self.process is None:
            return set()
        folders = _upload_folders_of_group(self.process.pid)
        if self.private_tmp is None:
            return folders
        return {self.private_tmp.upload_folder(f) for f in folders}

    def _clean_after_exit(self, regions: set[str], folders: set[str]) -> None:
        """Once no process of the node is left: what a killed server or stub leaves."""
        _remove_unmapped(regions)
        if self.private_tmp is not None:
            self.private_tmp.clean()  # every upload folder of the node, named or not
        else:
            _remove_upload_folders(folders)  # a clean exit removed them: only a kill's are left
        self.process = None

    def stop(self, timeout_s: float = 15.0) -> None:
        """SIGTERM the node's process group (server and python stubs), SIGKILL if it lingers."""
        proc = self.process
        if proc is None:
            return
        regions = _shm_regions_of_group(proc.pid)
        folders = self.upload_folders()
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)
        # Python stubs are in the same group; make sure none outlive the server.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        _wait_group_gone(proc.pid)
        self._clean_after_exit(regions, folders)


@dataclass
class LocalCluster:
    """N local nodes; a context manager that always stops them."""

    nodes: list[LocalNode]
    work_dir: Path
    install: TritonInstallation | None = None
    backends_dir: Path | None = None
    start_kwargs: dict = field(default_factory=dict)
    node_key: NodeKey | None = field(default=None, repr=False)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def kill(self, node: LocalNode) -> None:
        """SIGKILL a node and its python stubs, as a crash would (for fault tests)."""
        if node.process is not None:
            regions = _shm_regions_of_group(node.process.pid)
            folders = node.upload_folders()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(node.process.pid, signal.SIGKILL)
            node.process.wait(timeout=10)
            _wait_group_gone(node.process.pid)
            node._clean_after_exit(regions, folders)

    def restart(self, node: LocalNode, start_timeout_s: float = 60.0) -> None:
        """Start a stopped or killed node again on its ports; it comes back empty."""
        node.stop()
        start_node(node, install=self.install, backends_dir=self.backends_dir, **self.start_kwargs)
        _wait_until_ready(node, time.monotonic() + start_timeout_s)

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def __iter__(self) -> Iterator[LocalNode]:
        return iter(self.nodes)


def server_args(
    node: LocalNode, backends_dir: Path, *, metrics_interval_ms: int, extra: Sequence[str]
) -> list[str]:
    """The command line of one node: explicit control, loopback only, p99 summaries on, and
    with a node key its restricted APIs."""
    restricted = node.node_key.server_flags() if node.node_key else []
    return [
        f"--model-repository={node.repository}",
        f"--backend-directory={backends_dir}",
        "--model-control-mode=explicit",
        "--disable-auto-complete-config",
        f"--http-address={LOOPBACK}",
        f"--http-port={node.http_port}",
        f"--grpc-address={LOOPBACK}",
        f"--grpc-port={node.grpc_port}",
        f"--metrics-address={LOOPBACK}",
        f"--metrics-port={node.metrics_port}",
        "--metrics-config=summary_latencies=true",
        f"--metrics-interval-ms={metrics_interval_ms}",
        "--exit-timeout-secs=5",
        "--log-verbose=0",
        *restricted,
        *extra,
    ]


def _wait_until_ready(node: LocalNode, deadline: float) -> None:
    while time.monotonic() < deadline:
        if not node.is_running():
            code = node.process.returncode if node.process else "?"
            raise TritonLaunchError(
                f"Triton node '{node.name}' exited during start (exit code {code}); "
                f"log {node.log_path}:\n{node.log_tail()}"
            )
        if node.is_ready(timeout_s=0.5):
            return
        time.sleep(0.1)
    raise TritonLaunchError(
        f"Triton node '{node.name}' did not become ready within the start timeout; "
        f"log {node.log_path}:\n{node.log_tail()}"
    )


def _plan_nodes(
    count: int, work_dir: Path, base_port: int | None, prefix: str, node_key: NodeKey | None
) -> list[LocalNode]:
    if base_port is None:
        ports = free_ports(3 * count)
    else:
        ports = list(range(base_port, base_port + 3 * count))
        busy = [p for p in ports if not port_is_free(p)]
        if busy:
            raise TritonLaunchError(
                f"Port {busy[0]} is already in use on {LOOPBACK}: choose another base port "
                "or stop the process that holds it."
            )
    nodes = []
    for i in range(count):
        name = f"{prefix}{i + 1}"
        repo = work_dir / name / "repository"
        repo.mkdir(parents=True, exist_ok=True)
        nodes.append(
            LocalNode(
                name=name,
                http_port=ports[3 * i],
                grpc_port=ports[3 * i + 1],
                metrics_port=ports[3 * i + 2],
                repository=repo,
                log_path=work_dir / name / "tritonserver.log",
                node_key=node_key,
            )
        )
    return nodes


def start_node(
    node: LocalNode,
    *,
    install: TritonInstallation,
    backends_dir: Path,
    metrics_interval_ms: int = 2000,
    extra_args: Sequence[str] = (),
) -> None:
    """Spawn one node's process (returns at once; see start_cluster for readiness)."""
    node.log_path.parent.mkdir(parents=True, exist_ok=True)
    args = server_args(
        node, backends_dir, metrics_interval_ms=metrics_interval_ms, extra=extra_args
    )
    home = node.log_path.parent
    argv = [str(install.binary), *args]
    env = server_environment(install, home)
    tmp = PrivateTmp.plan(home / "tmp", argv, env, home)
    with open(node.log_path, "ab") as log:
        node.process = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=home,
            preexec_fn=_child_setup(tmp),  # noqa: PLW1509 - syscalls through a libc loaded before
        )
    node.private_tmp = tmp if tmp.serves(node.process.pid) else None


def start_cluster(
    count: int,
    work_dir: Path,
    *,
    base_port: int | None = None,
    name_prefix: str = "node",
    metrics_interval_ms: int = 2000,
    start_timeout_s: float = 90.0,
    extra_args: Sequence[str] = (),
    node_key: NodeKey | None = None,
) -> LocalCluster:
    """Start `count` nodes in parallel and wait until each is ready; on failure stop them all.

    With `node_key` every node restricts its control APIs to callers that send it.
    """
    if count < 1:
        raise TritonLaunchError("A local cluster needs at least one node.")
    work_dir = Path(work_dir).resolve()
    install = find_installation()
    backends_dir = prepare_backends(install, work_dir)
    start_kwargs = {"metrics_interval_ms": metrics_interval_ms, "extra_args": tuple(extra_args)}
    cluster = LocalCluster(
        nodes=_plan_nodes(count, work_dir, base_port, name_prefix, node_key),
        work_dir=work_dir,
        install=install,
        backends_dir=backends_dir,
        start_kwargs=start_kwargs,
        node_key=node_key,
    )
    try:
        for node in cluster.nodes:
            start_node(node, install=install, backends_dir=backends_dir, **start_kwargs)
        deadline = time.monotonic() + start_timeout_s
        for node in cluster.nodes:
            _wait_until_ready(node, deadline)
    except BaseException:
        cluster.stop()
        raise
    return cluster
