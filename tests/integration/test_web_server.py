"""The web command (controlplane/web_server.py): several daphne processes on one address.

Started as the kits and `make demo` start it, with two processes: keep-alive connections
opened at once are spread over both (a socket each, SO_REUSEPORT); websockets of either reach
each other's groups through the Redis channel layer; the body limits still apply as a body
arrives; a process that dies is replaced and no connection is lost meanwhile; an address
something listens on is refused; SIGTERM stops all.
"""

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from websockets.sync.client import connect

from accounts.services import ws_ticket_create
from bench.common import child_pids
from console.events import SYSTEM_GROUP, system_event
from controlplane import db_pool, web_server
from tests.conftest import ROOT, child_environment, in_thread, stop_process, wait_for
from tests.integration.test_body_limits import MIB, _answer, _head

pytestmark = pytest.mark.django_db(transaction=True)

PROCESSES = 2
SOCKETS = 8


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def _login_answers(port: int, timeout_s: float = 2.0) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
            sock.sendall(f"GET /login/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
            return _answer(sock)[0] == 200
    except OSError:
        return False


def _established_by_process(port: int, pids: set[int]) -> dict[int, int]:
    """Per process: its established TCP connections on local port `port` (/proc, IPv4)."""
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].split(":")[1], 16) == port and fields[3] == "01":  # ESTABLISHED
            inodes.add(fields[9])
    counts = {}
    for pid in pids:
        links = []
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):  # closed meanwhile (a database connection)
                links.append(os.readlink(fd))
        counts[pid] = sum(1 for link in links if link[8:-1] in inodes)  # "socket:[N]"
    return counts


def _keep_alive_spread(port: int, children: set[int], count: int = 20) -> dict[int, int]:
    """`count` keep-alive connections opened at once, each answered once and held open:
    how many each process holds."""
    with contextlib.ExitStack() as held:
        socks = [
            held.enter_context(socket.create_connection(("127.0.0.1", port), timeout=30))
            for _ in range(count)
        ]
        for sock in socks:
            sock.sendall(f"GET /login/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        for sock in socks:
            assert _answer(sock)[0] == 200
        return _established_by_process(port, children)


def test_two_processes_spread_connections_websockets_limits_restarts_and_stop(make_user, tmp_path):
    from integrations.triton.local import free_ports

    (port,) = free_ports(1)
    log = tmp_path / "web.log"
    user = make_user("rita", role="release-managers")
    tickets = [ws_ticket_create(user=user, token=None)[0] for _ in range(SOCKETS)]
    command = [sys.executable, "-m", "controlplane.web_server", "-b", "127.0.0.1", "-p", str(port)]
    env = child_environment(SWITCHYARD_WEB_PROCESSES=str(PROCESSES))
    with open(log, "wb") as out:
        launcher = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=out)
    children: set[int] = set()
    seen: set[int] = set()  # every daphne process it ran, the killed one too
    try:
        wait_for(lambda: _login_answers(port), timeout_s=60, what="the web", proc=launcher, log=log)
        children = child_pids(launcher.pid)
        assert len(children) == PROCESSES
        # A burst of keep-alive connections lands on every process (one socket shared by all
        # gave the first process awake the whole burst); 20 on one of 2 by chance: 2 in 2^20.
        spread = _keep_alive_spread(port, children)
        assert sum(spread.values()) == 20 and all(spread.values()), spread
        # Another server on the same address is refused, not let in beside these.
        taken = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
        assert taken.returncode != 0 and "cannot listen on" in taken.stderr, taken.stderr

        # Every socket gets a message sent to its group from here, whichever process holds it.
        origin, url = f"http://127.0.0.1:{port}", f"ws://127.0.0.1:{port}/ws/system/?ticket="
        with contextlib.ExitStack() as opened:
            sockets = [opened.enter_context(connect(url + t, origin=origin)) for t in tickets]
            for ws in sockets:
                assert json.loads(ws.recv(timeout=30))["type"] == "hello"
            notice = {"type": "notice", "text": "to every process"}
            send = async_to_sync(get_channel_layer().group_send)
            in_thread(send, SYSTEM_GROUP, system_event(notice))
            for ws in sockets:
                assert json.loads(ws.recv(timeout=30)) == notice

        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            sock.sendall(_head(port, "/api/v1/auth/token/", f"Content-Length: {MIB + 1}"))
            assert _answer(sock)[0] == 413  # refused before any body byte, in daphne

        seen |= children
        killed = sorted(children)[0]
        os.kill(killed, signal.SIGKILL)
        # Once the launcher has reaped it (a connection the dying process had accepted in its
        # last instant is lost with it), every connection is answered: by the other process,
        # or, those the kernel hands the dead one's socket, by its replacement once it starts.
        wait_for(
            lambda: f"process {killed} exited" in log.read_text(),
            timeout_s=60,
            what="the launcher to see the killed process exit",
            proc=launcher,
            log=log,
        )
        for _ in range(20):  # each connection answered, none refused or reset
            # (a busy suite on 2 cores may take seconds; what counts is no connection lost)
            assert _login_answers(port, timeout_s=30)
        wait_for(
            lambda: len(child_pids(launcher.pid) - {killed}) == PROCESSES,
            timeout_s=60,
            what="a new process in place of the killed one",
            proc=launcher,
            log=log,
        )
        children = child_pids(launcher.pid)
        seen |= children
        assert _login_answers(port)

        launcher.send_signal(signal.SIGTERM)
        assert launcher.wait(timeout=60) == 0
        assert not any(_alive(pid) for pid in children), log.read_text()[-2000:]
    finally:
        stop_process(launcher)
        for pid in children:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        # The killed process could not take its pool entry with it (it would go stale).
        client = redis.Redis.from_url(settings.REDIS_URL)
        for pid in seen:
            client.hdel(db_pool.stats_key(), f"{socket.gethostname()}:{pid}")
        client.close()


def test_the_process_count_follows_the_setting_then_the_cores(monkeypatch, tmp_path):
    monkeypatch.setenv("SWITCHYARD_WEB_PROCESSES", "3")
    assert web_server.processes_wanted(None) == 3
    assert web_server.processes_wanted(5) == 5
    monkeypatch.delenv("SWITCHYARD_WEB_PROCESSES")
    assert web_server.processes_wanted(None) == web_server.cpu_count()
    with pytest.raises(SystemExit):
        web_server.processes_wanted(0)


def test_a_cgroup_cpu_quota_caps_the_cores(tmp_path):
    cores = len(os.sched_getaffinity(0))
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert web_server.cpu_count(tmp_path) == cores
    (tmp_path / "cpu.max").write_text("150000 100000\n")  # --cpus 1.5: two processes
    assert web_server.cpu_count(tmp_path) == min(cores, 2)
    (tmp_path / "cpu.max").write_text("50000 100000\n")
    assert web_server.cpu_count(tmp_path) == 1
    assert web_server.cpu_count(tmp_path / "none") == cores


def test_endpoints_are_read_as_daphne_writes_them():
    assert web_server.tcp_endpoint("tcp:port=8000:interface=10.0.0.3") == ("10.0.0.3", 8000)
    assert web_server.tcp_endpoint("tcp:port=8000") == ("0.0.0.0", 8000)
    args, extra = web_server.parse(["-e", "tcp:port=8000:interface=127.0.0.1", "--verbosity", "1"])
    assert args.endpoint == [("127.0.0.1", 8000)] and extra == ["--verbosity", "1"]
