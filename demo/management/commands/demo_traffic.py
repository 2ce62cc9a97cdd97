"""`python manage.py demo_traffic [--cluster NAME] [--rps 20]`: steady demo traffic.

It follows what the cluster serves (targets re-read every `--refresh` s) and carries on
through what users do meanwhile: a model unloaded, a node added or removed, a release rolled
back. Failures are counted and logged, never the end of the command.
"""

import logging
import signal
import threading
import time

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, connection

from demo.targets import demo_targets
from demo.traffic import Traffic, TrafficTarget
from deployments.models import TritonCluster

log = logging.getLogger("demo.traffic")


def _names(targets: list[TrafficTarget]) -> str:
    return ", ".join(sorted({f"{t.model} v{t.version}" if t.version else t.model for t in targets}))


class Command(BaseCommand):
    help = "Send steady inference traffic (sticky x-user-id) to a local cluster's models."

    def add_arguments(self, parser):
        parser.add_argument("--cluster", default="", help="Cluster name (default: the first).")
        parser.add_argument("--rps", type=float, default=20.0)
        parser.add_argument("--duration", type=float, default=None, help="Stop after N s.")
        parser.add_argument(
            "--wait",
            type=float,
            default=0.0,
            help="Wait up to N s for the cluster and a serving model (demo).",
        )
        parser.add_argument(
            "--refresh", type=float, default=10.0, help="Re-read the targets every N s."
        )

    def _targets(self, cluster: str) -> tuple[str, list[TrafficTarget]]:
        found = None
        try:
            clusters = TritonCluster.objects.prefetch_related("nodes")
            found = clusters.filter(name=cluster).first() if cluster else clusters.first()
            targets = demo_targets(cluster=found) if found else []
        except DatabaseError as exc:  # PostgreSQL restarted or full: reconnect next time
            connection.close()
            raise CommandError(f"Database unavailable for now: {exc}") from exc
        except Exception as exc:  # noqa: BLE001 - a node down, a model gone: say so, retry
            raise CommandError(f"Targets of {cluster or 'the cluster'} unknown: {exc}") from exc
        if found is None:
            raise CommandError(f"No cluster {cluster!r}." if cluster else "No cluster yet.")
        if not targets:
            raise CommandError(f"Nothing serves on {found.name}: deploy a model first.")
        return found.name, targets

    def _first_targets(self, cluster: str, wait_s: float) -> tuple[str, list[TrafficTarget]]:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                return self._targets(cluster)
            except CommandError:
                # The demo starts this before the nodes serve anything: keep waiting.
                if time.monotonic() >= deadline:
                    raise
                time.sleep(2)

    def _follow(self, traffic: Traffic, cluster: str, current: list[TrafficTarget]) -> list:
        """The targets now; on a failure the old ones stay (their requests fail and count)."""
        try:
            _, targets = self._targets(cluster)
        except CommandError as exc:
            log.warning("%s; still sending to: %s", exc, _names(current) or "nothing")
            return current
        if targets != current:
            traffic.retarget(targets)
            self.stdout.write(f"demo traffic now at: {_names(targets)}")
        return targets

    def handle(self, *args, cluster: str, rps: float, duration: float | None, **options):
        name, targets = self._first_targets(cluster, options["wait"])
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        self.stdout.write(f"demo traffic: {rps} req/s at {name}: {_names(targets)}")
        self.stdout.flush()
        traffic = Traffic(targets, rps=rps).start()
        end = float("inf") if duration is None else time.monotonic() + duration
        while not stop.wait(timeout=max(0.0, min(options["refresh"], end - time.monotonic()))):
            if time.monotonic() >= end:
                break
            targets = self._follow(traffic, name, targets)
            self.stdout.write(f"sent {traffic.stats.sent} so far: {dict(traffic.stats.by_status)}")
            self.stdout.flush()
        stats = traffic.stop()
        self.stdout.write(f"sent {stats.sent}: {dict(stats.by_status)}")
