"""Print the demo's URL and logins once the console answers, then wait with the others."""

import signal
import sys
import time
import urllib.error
import urllib.request

from django.core.management.base import BaseCommand

from console.demo import demo_logins, demo_seed


class Command(BaseCommand):
    help = "Wait for the demo console, print where it is and the demo logins."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--timeout", type=float, default=120.0)
        parser.add_argument("--triton-base-port", type=int, default=18000)

    def _wait(self, url: str, deadline: float) -> None:
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(url, timeout=3)  # noqa: S310 - loopback only
                return
            except urllib.error.HTTPError:
                return
            except OSError:
                time.sleep(0.5)

    def handle(self, *args, **opts):
        url = f"http://127.0.0.1:{opts['port']}/"
        deadline = time.monotonic() + opts["timeout"]
        self._wait(url + "healthz", deadline)  # any answer will do (503 while a worker starts)
        base = opts["triton_base_port"]
        for port in (base, base + 3):  # the two local Triton nodes
            self._wait(f"http://127.0.0.1:{port}/v2/health/live", deadline)
        for line in demo_seed(base_port=base):
            self.stdout.write(line)
        logins = demo_logins()
        width = max(len(x["username"]) for x in logins)
        lines = [
            "",
            "=" * 64,
            f"  Switchyard demo console: {url}",
            "  Demo logins (DEMO ONLY, new passwords each run):",
            *(f"    {x['username']:<{width}}  {x['password']}  ({x['role']})" for x in logins),
            "  Ctrl-C stops everything.",
            "=" * 64,
            "",
        ]
        self.stdout.write("\n".join(lines))
        self.stdout.flush()
        signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
        try:
            while True:
                signal.pause()
        except KeyboardInterrupt:
            pass
