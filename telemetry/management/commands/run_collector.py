"""`python manage.py run_collector [--interval 2]`: the long-running metrics collector."""

import asyncio
import signal

from django.conf import settings
from django.core.management.base import BaseCommand

from telemetry.runner import CollectorRunner


class Command(BaseCommand):
    help = "Scrape every Triton node (or query Prometheus), stream live points, keep rollups."

    def add_arguments(self, parser):
        parser.add_argument("--interval", type=float, default=settings.TELEMETRY_INTERVAL_S)
        parser.add_argument("--ticks", type=int, default=None, help="Stop after N ticks.")

    def handle(self, *args, interval: float, ticks: int | None, **options):
        if interval <= 0:
            self.stderr.write("--interval must be positive")
            return
        asyncio.run(self._main(interval, ticks))

    async def _main(self, interval: float, ticks: int | None) -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        self.stdout.write(f"collector: every {interval} s; Ctrl-C stops (rollups are flushed)")
        await CollectorRunner(interval_s=interval).run(stop, ticks=ticks)
