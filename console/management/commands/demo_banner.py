"""Print the demo's URL and logins once the console answers, then wait with the others."""

import signal
import sys
import time
import urllib.error
import urllib.request

from django.core.management.base import BaseCommand

from console.demo import demo_logins


class Command(BaseCommand):
    help = "Wait for the demo console, print where it is and the demo logins."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--timeout", type=float, default=120.0)

    def handle(self, *args, **opts):
        url = f"http://127.0.0.1:{opts['port']}/"
        deadline = time.monotonic() + opts["timeout"]
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(url + "healthz", timeout=3)  # noqa: S310 - loopback
                break
            except urllib.error.HTTPError:
                break  # it answers (503 while the worker starts is fine)
            except OSError:
                time.sleep(0.5)
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
