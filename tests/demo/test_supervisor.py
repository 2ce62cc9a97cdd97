"""The demo's supervisor with real processes: one that dies is reported and restarted while
the others run on; errors from its log reach the terminal, a few a minute; stop_all leaves
nothing behind, also a process that ignores SIGTERM."""

import threading
from pathlib import Path

from demo import supervisor as sv
from demo.supervisor import Supervisor
from tests.conftest import wait_for


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _run_until(sup: Supervisor, done, what: str, said: list, timeout_s: float = 60.0) -> None:
    """Supervise (sup.check() every 0.2 s) until `done()`; fail saying what it said."""

    def checked():
        sup.check()
        return done()

    try:
        wait_for(checked, timeout_s=timeout_s, what=what)
    except RuntimeError as exc:
        raise AssertionError(f"{exc}; the supervisor said {said}") from None


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
    log = tmp_path / "log" / "crash.log"

    def exits() -> list[str]:
        return [s for s in said if s.startswith("warning: crash exited with code 3; restart")]

    try:
        # The crash restarts after 1 s, then 2 s: three runs in all.
        _run_until(
            sup,
            lambda: len(exits()) >= 2 and log.read_text().count("ERROR boom") >= 3,
            "the crash run three times",
            said,
        )
        assert crash.proc.pid != first_crash
        assert steady.proc.pid == first_steady and steady.proc.poll() is None
        assert "restart 2 in 2 s" in exits()[1], said
        assert said.count("crash: ERROR boom") == 2  # the limit; the rest stays in the log
        assert not [s for s in said if s.startswith(("steady", "warning: steady"))]
    finally:
        pids = [c.proc.pid for c in sup.children]
        # stop_all kills what ignores SIGTERM after the grace instead of waiting on it: it
        # returns (a deadline far past the grace only catches a hang).
        stopping = threading.Thread(target=sup.stop_all, kwargs={"grace_s": 1}, daemon=True)
        stopping.start()
        wait_for(lambda: not stopping.is_alive(), timeout_s=60, what="stop_all to return")
    assert not [pid for pid in pids if _alive(pid)]
    assert any("ignored SIGTERM" in s for s in said), said
