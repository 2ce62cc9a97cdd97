"""The demo's supervisor with real processes: one that dies is reported and restarted while
the others run on; errors from its log reach the terminal, a few a minute; stop_all leaves
nothing behind, also a process that ignores SIGTERM."""

import time
from pathlib import Path

from demo import supervisor as sv
from demo.supervisor import Supervisor


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _run(sup: Supervisor, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sup.check()
        time.sleep(0.1)


def test_a_dead_process_is_restarted_and_reported_the_others_run_on(tmp_path, monkeypatch):
    monkeypatch.setattr(sv, "ECHO_PER_MINUTE", 2)
    said: list[str] = []
    commands = {
        "steady": ["sleep", "60"],
        "crash": ["sh", "-c", "echo 'starting'; echo 'ERROR boom'; exit 3"],
        "stubborn": ["sh", "-c", "trap '' TERM; sleep 60"],
    }
    sup = Supervisor(commands, log_dir=tmp_path / "log", env={"PATH": "/usr/bin:/bin"},
                     cwd=tmp_path, say=said.append)  # fmt: skip
    sup.start_all()
    steady, crash, stubborn = sup.children
    first_steady, first_crash = steady.proc.pid, crash.proc.pid
    try:
        _run(sup, 4.5)  # the crash restarts after 1 s, then 2 s: three runs in all
        assert crash.proc.pid != first_crash
        assert steady.proc.pid == first_steady and steady.proc.poll() is None
        exits = [s for s in said if s.startswith("warning: crash exited with code 3; restart")]
        assert len(exits) >= 2 and "restart 2 in 2 s" in exits[1], said
        assert said.count("crash: ERROR boom") == 2  # the limit; the rest stays in the log
        assert not [s for s in said if s.startswith(("steady", "warning: steady"))]
        assert (tmp_path / "log" / "crash.log").read_text().count("ERROR boom") >= 3
    finally:
        pids = [c.proc.pid for c in sup.children]
        started = time.monotonic()
        sup.stop_all(grace_s=1)
    assert time.monotonic() - started < 10
    assert not [pid for pid in pids if _alive(pid)]
    assert any("ignored SIGTERM" in s for s in said), said
