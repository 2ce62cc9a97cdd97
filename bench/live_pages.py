"""The live pages and the release cockpit opening with a day of history (issue #27).

A database (`switchyard_bench_live`) and a Redis database (8) of the bench's own, holding
what tests/browser/test_live_pages_day.py opens: a day of per-minute rollups (20 series on
the model page and on the cluster page, written through telemetry.services) and a release
with 1,440 one-minute analysed intervals and 600 guard samples. The web served as
`make demo` serves it (daphne); Debian's Chromium through Playwright, signed in as a
release manager, opens each page R times (a new tab each round, the browser's cache warm
after the first, as for a user coming back):

* model live page    /models/risk_score/live/?range=24h (4 charts)
* cluster live page  /clusters/prod/live/?range=24h     (7 charts)
* release cockpit    /releases/<id>/                    (5 charts)

Every figure comes from the browser's own performance timeline: the navigation entry's
load event, and the marks the pages set when each chart is drawn
(`switchyard:chart-drawn:<id>`) and when every chart is (`switchyard:charts-drawn`), all in
ms from navigation start (and when the document and each metrics API answer arrived, to
place a miss). Prints every round, then the median and worst per page against
the goal (every chart drawn within 1 s, on 2 cores). No collector runs: the pages draw the
day's history, not live points.

Usage: .venv/bin/python bench/live_pages.py [--rounds 5]
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DB_NAME = "switchyard_bench_live"
REDIS_DB = 8  # 9-15 serve the test runs and the other benches: flushed at the end
QUEUE = "switchyard-bench-live"
CHROMIUM = "/usr/bin/chromium"
GOAL_MS = 1000.0
sys.path.insert(0, str(ROOT))
from bench.common import (  # noqa: E402
    DB_SERVER,
    bench_redis,
    throwaway_database,
    wait_until,
)

TIMELINE = """() => {
  const nav = performance.getEntriesByType("navigation")[0];
  const marks = {};
  performance.getEntriesByType("mark").forEach((m) => {
    if (m.name.startsWith("switchyard:")) marks[m.name.slice(11)] = m.startTime;
  });
  const api = performance.getEntriesByType("resource")
    .filter((e) => e.name.includes("/api/v1/metrics/"))
    .map((e) => [e.startTime, e.responseEnd, e.encodedBodySize]);
  return { load: nav.loadEventEnd, dom: nav.domContentLoadedEventEnd,
           html: nav.responseEnd, bytes: nav.encodedBodySize, marks: marks, api: api };
}"""


def _environment(work: Path) -> None:
    """Before django.setup(): this process and daphne use the bench's own database,
    Redis database, queue and folders."""
    os.environ.update(
        DJANGO_SETTINGS_MODULE="controlplane.settings.dev",
        DATABASE_URL=f"{DB_SERVER}/{DB_NAME}",
        REDIS_URL=f"redis://127.0.0.1:6379/{REDIS_DB}",
        SWITCHYARD_CELERY_QUEUE=QUEUE,
        SWITCHYARD_VAR_DIR=str(work / "var"),
        SWITCHYARD_STORAGE_ROOT=str(work / "artifacts"),
        PYTHONUNBUFFERED="1",
    )
    os.environ.pop("CELERY_BROKER_URL", None)
    os.environ.pop("CELERY_RESULT_BACKEND", None)


def _redis():
    return bench_redis(REDIS_DB)


def _database(action: str) -> None:
    throwaway_database(DB_NAME, action)


def _make_user(username: str, *, role: str | None = None):
    """As the tests' make_user: password pw-<name>, in the role's group."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    user = get_user_model().objects.create_user(username=username, password=f"pw-{username}")
    if role:
        user.groups.add(Group.objects.get_or_create(name=role)[0])
    return user


def _seed() -> dict:
    from django.db import transaction

    from tests.release_setup import release_world
    from tests.telemetry.day_history import day_release, day_rollups

    started = time.monotonic()
    with transaction.atomic():
        world = release_world(_make_user)
    rows = day_rollups()
    release = day_release(world)
    print(
        f"seeded {rows} rollup rows and release {release.pk} in {time.monotonic() - started:.0f} s"
    )
    return {"release": release.pk}


def _pages(release_id: int) -> list[tuple[str, str]]:
    return [
        ("model live", "/models/risk_score/live/?range=24h"),
        ("cluster live", "/clusters/prod/live/?range=24h"),
        ("cockpit", f"/releases/{release_id}/"),
    ]


def _round(context, base: str, path: str) -> dict:
    page = context.new_page()
    try:
        page.goto(f"{base}{path}")
        page.wait_for_function(
            "performance.getEntriesByName('switchyard:charts-drawn').length > 0", timeout=120000
        )
        page.wait_for_function("performance.getEntriesByType('navigation')[0].loadEventEnd > 0")
        return page.evaluate(TIMELINE)
    finally:
        page.close()


def _print_round(name: str, i: int, t: dict) -> None:
    charts = {k.split(":", 1)[1]: v for k, v in t["marks"].items() if k.startswith("chart-drawn:")}
    each = ", ".join(f"{k} {v:.0f}" for k, v in sorted(charts.items(), key=lambda kv: kv[1]))
    api = "; ".join(f"{a:.0f}-{b:.0f} ms, {n / 1024:.0f} KiB" for a, b, n in t["api"])
    print(
        f"{name:13s} round {i}: load event {t['load']:.0f} ms, every chart drawn "
        f"{t['marks']['charts-drawn']:.0f} ms (HTML {t['html']:.0f} ms, {t['bytes'] / 1024:.0f}"
        f" KiB; DOMContentLoaded {t['dom']:.0f} ms; metrics API {api or 'not asked'}) | {each}"
    )


def _measure(base: str, release_id: int, rounds: int) -> dict[str, list[dict]]:
    from playwright.sync_api import sync_playwright

    out: dict[str, list[dict]] = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu", "--no-first-run"]
        )
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        login = context.new_page()
        login.goto(f"{base}/login/")
        login.fill("#id_username", "rita")
        login.fill("#id_password", "pw-rita")
        login.click("button[type=submit]")
        login.wait_for_url(f"{base}/")
        login.close()
        for name, path in _pages(release_id):
            out[name] = []
            for i in range(1, rounds + 1):
                timeline = _round(context, base, path)
                _print_round(name, i, timeline)
                out[name].append(timeline)
        browser.close()
    return out


def _summary(results: dict[str, list[dict]]) -> None:
    count = len(next(iter(results.values())))
    print(f"\nper page over {count} rounds (goal: every chart drawn <= {GOAL_MS:.0f} ms)")
    for name, rounds in results.items():
        drawn = [r["marks"]["charts-drawn"] for r in rounds]
        load = [r["load"] for r in rounds]
        verdict = "met" if max(drawn) <= GOAL_MS else "MISSED"
        print(
            f"{name:13s} load event median {statistics.median(load):.0f} ms, worst {max(load):.0f}"
            f" | every chart drawn median {statistics.median(drawn):.0f} ms, worst "
            f"{max(drawn):.0f} ms: {verdict}"
        )


def _daphne(work: Path, port: int) -> subprocess.Popen:
    """The web as `make demo` serves it."""
    args = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port)]
    with open(work / "web.log", "ab") as log:
        return subprocess.Popen(
            [*args, "controlplane.asgi:application"],
            cwd=ROOT,
            env=os.environ.copy(),
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def _answers(url: str) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - loopback
            return response.status == 200
    except OSError:
        return False


def main(rounds: int) -> None:
    if _redis().dbsize():
        raise SystemExit(f"Redis database {REDIS_DB} is not empty: is another run going on?")
    work = Path(tempfile.mkdtemp(prefix="bench-live-"))
    _environment(work)
    _database("create")
    web = None
    try:
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connections

        from integrations.triton.local import free_ports

        call_command("migrate", verbosity=0)
        seeded = _seed()
        connections.close_all()
        (port,) = free_ports(1)
        web = _daphne(work, port)
        base = f"http://127.0.0.1:{port}"
        wait_until(lambda: _answers(f"{base}/login/"), 60, "daphne")
        print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
        results = _measure(base, seeded["release"], rounds)
        print(f"load average after: {os.getloadavg()[0]:.2f}")
        _summary(results)
    finally:
        if web is not None:
            web.terminate()
            try:
                web.wait(15)
            except subprocess.TimeoutExpired:
                web.kill()
                web.wait(5)
        from django.db import connections

        connections.close_all()
        _database("drop")
        _redis().flushdb()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    main(parser.parse_args().rounds)
