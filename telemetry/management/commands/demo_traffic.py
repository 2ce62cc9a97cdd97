"""`python manage.py demo_traffic [--cluster NAME] [--rps 20]`: steady demo traffic."""

import signal
import threading
import time

from django.core.management.base import BaseCommand, CommandError

from deployments.models import TritonCluster
from integrations.triton.errors import TritonError
from telemetry.selectors import demo_targets
from telemetry.traffic import Traffic


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

    def _targets(self, cluster: str):
        clusters = TritonCluster.objects.prefetch_related("nodes")
        found = clusters.filter(name=cluster).first() if cluster else clusters.first()
        if found is None:
            raise CommandError(f"No cluster {cluster!r}." if cluster else "No cluster yet.")
        try:
            targets = demo_targets(cluster=found)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        if not targets:
            raise CommandError(f"Nothing serves on {found.name}: deploy a model first.")
        return found, targets

    def handle(self, *args, cluster: str, rps: float, duration: float | None, **options):
        deadline = time.monotonic() + options["wait"]
        while True:
            try:
                found, targets = self._targets(cluster)
                break
            except (CommandError, TritonError, OSError) as exc:
                # The demo starts this before the nodes serve anything: keep waiting.
                if time.monotonic() >= deadline:
                    raise CommandError(str(exc)) from None
                time.sleep(2)
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        names = sorted({f"{t.model} v{t.version}" if t.version else t.model for t in targets})
        self.stdout.write(f"demo traffic: {rps} req/s at {found.name}: {', '.join(names)}")
        traffic = Traffic(targets, rps=rps).start()
        stop.wait(timeout=duration)
        stats = traffic.stop()
        self.stdout.write(f"sent {stats.sent}: {dict(stats.by_status)}")
