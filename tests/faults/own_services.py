"""A Redis and a PostgreSQL of a test's own, on free loopback ports, that the test may kill
and restart at will. The machine's shared servers (5432, 6379) are never touched.

PostgreSQL refuses to run as root: its folder (under /tmp, outside the work tree) belongs to
the `postgres` OS user, and its commands run as that user when the tests run as root. Its
dynamic shared memory lives in its data folder (`mmap`), so nothing is left in /dev/shm.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from integrations.triton.local import free_ports

REDIS_SERVER = "/usr/bin/redis-server"
PG_BIN = Path("/usr/lib/postgresql/15/bin")
PG_USER = "switchyard"


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


def _until(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not after {timeout_s} s")
        time.sleep(0.05)


class OwnRedis:
    """redis-server on a free port, nothing persisted; `kill()` is a SIGKILL."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        (self.port,) = free_ports(1)
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        args = [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1"]
        args += ["--save", "", "--appendonly", "no", "--dir", str(self.folder)]
        with open(self.folder / "redis.log", "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        _until(lambda: _listening(self.port), 10, "redis-server")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None


class OwnPostgres:
    """A PostgreSQL 15 cluster (trust auth, role `switchyard`) on a free port."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="switchyard-pg-"))
        self.data = self.root / "data"
        (self.port,) = free_ports(1)
        self.as_postgres = os.geteuid() == 0
        if self.as_postgres:
            account = pwd.getpwnam("postgres")
            os.chown(self.root, account.pw_uid, account.pw_gid)

    def url(self, database: str) -> str:
        return f"postgres://{PG_USER}@127.0.0.1:{self.port}/{database}"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        prefix = ["runuser", "-u", "postgres", "--"] if self.as_postgres else []
        return subprocess.run(
            [*prefix, *args], check=check, capture_output=True, text=True, timeout=60
        )

    def init(self, database: str) -> None:
        self._run(
            str(PG_BIN / "initdb"),
            "-D",
            str(self.data),
            "-U",
            PG_USER,
            "--auth=trust",
            "--no-sync",
            "--no-instructions",
        )
        self.start()
        self._run(
            str(PG_BIN / "createdb"),
            "-h",
            str(self.root),
            "-p",
            str(self.port),
            "-U",
            PG_USER,
            database,
        )

    def start(self) -> None:
        options = (
            f"-c port={self.port} -c listen_addresses=127.0.0.1 "
            f"-c unix_socket_directories={self.root} -c dynamic_shared_memory_type=mmap "
            "-c fsync=off -c full_page_writes=off -c max_connections=40"
        )
        log = str(self.root / "postgres.log")
        # -w: pg_ctl returns once the server accepts connections.
        self._run(
            str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-o", options, "-l", log, "-w", "start"
        )

    def stop(self, mode: str = "fast") -> None:
        self._run(str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    def running(self) -> bool:
        status = self._run(str(PG_BIN / "pg_ctl"), "-D", str(self.data), "status", check=False)
        return status.returncode == 0

    def remove(self) -> None:
        """Stop it if it runs, and delete its folder."""
        try:
            if self.data.exists() and self.running():
                self.stop("immediate")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def log_tail(self) -> str:
        path = self.root / "postgres.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""


SEED = """
from django.contrib.auth.models import Group, User
from django.core.management import call_command

from accounts.services import api_token_create

call_command("migrate", interactive=False, verbosity=0, skip_checks=True)
olga = User.objects.create_user("olga", password="pw-olga")
olga.groups.add(Group.objects.get_or_create(name="release-managers")[0])
print("TOKEN", api_token_create(user=olga, name="restarts")[1])
"""


def migrate_and_seed(env: dict[str, str], timeout_s: float = 180) -> str:
    """Migrate the database `env` names (DATABASE_URL) and add a release manager, olga, in a
    process of its own; her API token. RuntimeError with the output's end when it fails."""
    import sys

    from tests.conftest import ROOT, child_environment

    seeded = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", SEED],
        cwd=ROOT,
        env=child_environment(**env),
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    if seeded.returncode != 0:
        raise RuntimeError(seeded.stderr[-3000:])
    return next(x for x in seeded.stdout.splitlines() if x.startswith("TOKEN ")).split()[1]
