"""The demo's process supervisor: each process in its own session with its output in its own
log file; a process that exits is reported and restarted (with a growing delay), never the
end of the others; warnings and errors from the logs reach the terminal, a few a minute.

Plain Python, no Django: `demo_run` gives it the commands and a function to print with.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

# Log lines worth a terminal line: Python's and Celery's levels, tracebacks, nginx's [emerg].
NOTEWORTHY = re.compile(r"\b(WARNING|ERROR|CRITICAL|FATAL)\b|Traceback|\[(emerg|alert|crit)\]")
ECHO_PER_MINUTE = 3  # per process; the rest stays in its log file ...
ECHO_TOTAL_PER_MINUTE = 8  # ... and all processes together: the banner stays in sight
MAX_RESTART_DELAY_S = 30.0
STABLE_AFTER_S = 60.0  # a process that ran this long starts its restart delays afresh


@dataclass
class Child:
    name: str
    argv: Sequence[str]
    log_path: Path
    proc: subprocess.Popen | None = None
    started_at: float = 0.0
    restarts: int = 0
    restart_at: float | None = None  # when a dead process is due to start again
    log_offset: int = 0
    echoed: list[float] = field(default_factory=list)  # times of recent echoed lines
    muted: int = 0  # noteworthy lines not echoed since the last echo


class Supervisor:
    """Start, watch, restart and stop the demo's processes."""

    def __init__(
        self,
        commands: Mapping[str, Sequence[str]],
        *,
        log_dir: Path,
        env: Mapping[str, str],
        cwd: Path,
        say: Callable[[str], None],
    ):
        log_dir.mkdir(parents=True, exist_ok=True)
        self.children = [Child(n, list(a), log_dir / f"{n}.log") for n, a in commands.items()]
        self.env, self.cwd, self.say = dict(env), cwd, say
        self.echoed: list[float] = []  # times of recent echoed lines, all processes

    def start_all(self) -> None:
        for child in self.children:
            child.log_path.write_bytes(b"")  # each run's logs start empty
            self._start(child)

    def _start(self, child: Child) -> None:
        with open(child.log_path, "ab") as out:
            child.proc = subprocess.Popen(
                child.argv,
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C reaches the supervisor, which stops each one
            )
        child.started_at, child.restart_at = time.monotonic(), None

    def check(self) -> None:
        """Restart what died (when due), echo new warnings and errors; call it often."""
        now = time.monotonic()
        for child in self.children:
            self._echo(child, now)
            if child.restart_at is not None:
                if now >= child.restart_at:
                    self._start(child)
            elif child.proc is not None and child.proc.poll() is not None:
                self._schedule_restart(child, now)

    def _schedule_restart(self, child: Child, now: float) -> None:
        if now - child.started_at >= STABLE_AFTER_S:
            child.restarts = 0
        child.restarts += 1
        delay = min(2.0 ** (child.restarts - 1), MAX_RESTART_DELAY_S)
        child.restart_at = now + delay
        self.say(
            f"warning: {child.name} exited with code {child.proc.returncode}; restart "
            f"{child.restarts} in {delay:.0f} s (its log: {child.log_path})"
        )

    def _echo(self, child: Child, now: float) -> None:
        try:
            with open(child.log_path, "rb") as log:
                log.seek(child.log_offset)
                chunk = log.read()
        except OSError:
            return
        end = chunk.rfind(b"\n") + 1  # whole lines only; the rest next time
        child.log_offset += end
        for raw in chunk[:end].splitlines():
            line = raw.decode(errors="replace").rstrip()
            if NOTEWORTHY.search(line):
                self._echo_line(child, line, now)

    def _echo_line(self, child: Child, line: str, now: float) -> None:
        child.echoed = [t for t in child.echoed if now - t < 60]
        self.echoed = [t for t in self.echoed if now - t < 60]
        if len(child.echoed) >= ECHO_PER_MINUTE or len(self.echoed) >= ECHO_TOTAL_PER_MINUTE:
            child.muted += 1
            return
        if child.muted:
            line = f"{line}  (and {child.muted} more in {child.log_path})"
            child.muted = 0
        child.echoed.append(now)
        self.echoed.append(now)
        self.say(f"{child.name}: {line[:300]}")

    def stop_all(self, grace_s: float = 20.0) -> None:
        """SIGTERM to every process's session, SIGKILL to what is left after grace_s."""
        running = [c.proc for c in self.children if c.proc and c.proc.poll() is None]
        for proc in running:
            _signal_group(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for proc in running:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.say(f"warning: pid {proc.pid} ignored SIGTERM; killing it")
        for proc in running:  # the leader and anything still in its session
            _signal_group(proc.pid, signal.SIGKILL)
            if proc.poll() is None:
                proc.wait(timeout=5)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
