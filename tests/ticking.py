"""Release ticks as production runs them: a real Celery worker per lane (`releases`, and
`fleet` with `long`), and `releases.tick_active` queued on a timer as celery beat's
`releases-tick` entry does. The tick runs in the releases-lane worker; a load it starts runs
on the fleet lane (releases/loads.py). Nothing in the test process ticks.

`Lanes` starts the workers (the session's, `tests/conftest.py` `lanes`, or a fault test's
own on its own queue); `Ticking` is the beat loop plus what a test waits on: the phase it
wants, or a number of ticks run (counted from the releases worker's log: a positive signal
that the loop ran, which every "nothing happened" check waits for first)."""

import re
import threading
import uuid
from pathlib import Path

import redis
from django.conf import settings

from controlplane.queues import FLEET, LONG, RELEASES, all_queues, lane_queue
from tests.conftest import WorkerHandle, start_celery_worker, wait_for

# What a Celery worker logs (INFO) when a task returns; a tick that raised is logged as
# "raised" and recorded on its release (releases/tick.py `release_tick_isolated`).
_TICK_DONE = re.compile(r"Task releases\.tick\[[0-9a-f-]+\] succeeded")


class Lanes:
    """A worker per lane on base queue `base`: one on the releases lane (ticks), one on the
    fleet and long lanes (loads, pushes, benchmarks). `env` goes to both."""

    def __init__(self, log_dir: Path, base: str | None = None, env: dict | None = None):
        self.base = base or f"lanes-{uuid.uuid4().hex[:10]}"
        self.log_dir, self.env = Path(log_dir), dict(env or {})
        self.workers: dict[str, WorkerHandle] = {}
        self.storage: Path | None = None

    @classmethod
    def of(cls, worker: WorkerHandle) -> "Lanes":
        """One worker already serving every lane of its queue, seen as Lanes."""
        lanes = cls(worker.log.parent, worker.queue)
        lanes.workers = {"releases": worker}
        return lanes

    def start(self) -> "Lanes":
        try:
            for name, lanes in (("releases", [RELEASES]), ("fleet", [FLEET, LONG])):
                self.workers[name] = start_celery_worker(
                    self.log_dir / f"{self.base}-{name}.log",
                    self.base,
                    lanes=[lane_queue(self.base, lane) for lane in lanes],
                    env=self.env,
                )
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for worker in self.workers.values():
            worker.stop()
        self.workers.clear()

    def __enter__(self) -> "Lanes":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def ticks_done(self) -> int:
        """How many ticks the releases worker has finished since it started."""
        log = self.workers["releases"].log
        return len(_TICK_DONE.findall(log.read_text(errors="replace")))

    def alive(self) -> None:
        """Raise, with its log's tail, when a lane's worker has exited."""
        for name, worker in self.workers.items():
            if worker.proc.poll() is not None:
                tail = worker.log.read_text(errors="replace")[-3000:]
                code = worker.proc.returncode
                raise AssertionError(f"the {name} worker exited ({code}):\n{tail}")

    def idle(self) -> bool:
        """Nothing queued on any lane and no task running on any worker."""
        from controlplane.celery import app

        client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
        try:
            if any(client.llen(name) for name in all_queues(self.base)):
                return False
        finally:
            client.close()
        names = [w.hostname for w in self.workers.values()]
        active = app.control.inspect(destination=names, timeout=1.0).active() or {}
        return len(active) == len(names) and not any(active.values())


class Ticking(threading.Thread):
    """Queues `releases.tick_active` and `plans.tick_active` on `lanes`' releases lane every
    `every_s` (beat's two entries queue them every second with the same expiry), until
    stopped."""

    def __init__(self, lanes: Lanes, every_s: float = 0.5):
        super().__init__(daemon=True)
        self.lanes, self.every_s = lanes, every_s
        self._halt = threading.Event()
        self._running = threading.Event()
        self._running.set()
        self.sent = 0
        self._ticks_at_start = lanes.ticks_done()

    def run(self) -> None:
        from plans.tasks import tick_active as plans_tick_active
        from releases.tasks import tick_active

        queue = lane_queue(self.lanes.base, RELEASES)
        while not self._halt.is_set():
            if self._running.is_set():
                for task in (tick_active, plans_tick_active):
                    task.apply_async(queue=queue, expires=settings.SWITCHYARD_TICK_EXPIRES_S)
                self.sent += 1
            self._halt.wait(self.every_s)

    def __enter__(self) -> "Ticking":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop queueing, then wait until the workers finished what was queued (a load left
        running would change the shared nodes under the next test)."""
        self._halt.set()
        if self.is_alive():
            self.join(10)
        if self.lanes.workers:
            wait_for(self.lanes.idle, timeout_s=120, what="the lanes' workers to go idle")

    def pause(self) -> None:
        """Queue no more ticks until `resume`, and wait until the queued ones have run."""
        self._running.clear()
        wait_for(self.lanes.idle, timeout_s=120, what="the lanes' workers to go idle")

    def resume(self) -> None:
        self._running.set()

    def ticks(self) -> int:
        """Ticks the releases worker finished since this loop was made."""
        return self.lanes.ticks_done() - self._ticks_at_start

    def until(self, release_id: int, done, what: str, timeout_s: float = 120.0):
        """Wait until `done(release)` holds for the stored release; fail saying what was seen
        (phase, reason, its latest events, the ticks run)."""
        from releases.models import Release

        seen: list = []

        def check():
            self.lanes.alive()
            release = Release.objects.get(pk=release_id)
            state = (release.phase, release.step_index, release.candidate_weight, release.reason)
            if not seen or seen[-1] != state:
                seen.append(state)
            return release if done(release) else None

        try:
            return wait_for(check, timeout_s=timeout_s, what=what)
        except RuntimeError:
            events = list(
                Release.objects.get(pk=release_id)
                .events.order_by("-id")
                .values_list("kind", "message")[:8]
            )
            raise AssertionError(
                f"{what}: not after {timeout_s} s and {self.ticks()} ticks; states seen "
                f"{seen[-8:]}; latest events {events}"
            ) from None

    def phase(self, release_id: int, phases: set[str], timeout_s: float = 120.0):
        """The release once its phase is one of `phases`."""
        return self.until(
            release_id, lambda r: r.phase in phases, f"release in {sorted(phases)}", timeout_s
        )

    def more_ticks(self, n: int, timeout_s: float = 60.0) -> int:
        """Wait until `n` more ticks have run (the loop ran: now an absence means something)."""
        target = self.ticks() + n

        def done():
            self.lanes.alive()
            return self.ticks() >= target

        wait_for(done, timeout_s=timeout_s, what=f"{n} more ticks (at {self.ticks()})")
        return self.ticks()
