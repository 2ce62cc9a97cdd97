"""Cost reports at fleet scale, on a throwaway PostgreSQL database.

`.venv/bin/python bench/cost_report.py [--nodes 20] [--versions 200] [--days 90] [--calls 20]`

1. Writes `days` of hourly cost rollups for `nodes` x `versions` (plus each node's idle and
   unknown rows) with one server-side INSERT ... SELECT, then the day rows from them as the
   periodic task does. Times GET /api/v1/reports/cost/?group_by=model over the whole range
   through the API (Django's test client: URL routing, auth, DRF, JSON), `calls` times,
   and prints the p95 (goal: at most 300 ms) and its ratio to a plain SQL
   `SELECT model_name, SUM(cost_ticks) ... GROUP BY model_name` over the same hour rows.
2. Writes the last hour's per-minute telemetry rollups for the same fleet, times the
   periodic task's work for that hour (the hour's cost rows, the cluster sums, and that
   day's rows again; CPU of this process and wall time) and prints its ratio to a plain SQL
   SUM of compute time per (node, model, version) over the same minute rows.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings.dev")

HOUR_ROWS = """
INSERT INTO reports_costrollup (cluster_id, node_name, period, start, kind, model_name,
    version, cost_kind, cost_ticks, idle_share_ticks, requests, successes, compute_us, minutes)
SELECT %(cluster)s, 'node' || n, 'hour', h, 'model', 'model' || (v / 2), (v %% 2)::text,
    'serving', 1000 + (v * 7919 + n * 31 + extract(hour from h)::int) %% 5000, 300, 3600,
    3590, 1.5e9, 60
FROM generate_series(%(since)s::timestamptz, %(last)s::timestamptz, interval '1 hour') AS h,
     generate_series(1, %(nodes)s) AS n, generate_series(0, %(versions)s - 1) AS v
UNION ALL
SELECT %(cluster)s, 'node' || n, 'hour', h, k, '', '', '', 400000, 0, 0, 0, 0, 60
FROM generate_series(%(since)s::timestamptz, %(last)s::timestamptz, interval '1 hour') AS h,
     generate_series(1, %(nodes)s) AS n, unnest(ARRAY['idle', 'unknown']) AS k
"""

MINUTE_ROWS = """
INSERT INTO telemetry_rollup (cluster_id, node_name, model_name, version, minute, requests,
    successes, failures, request_us, queue_us, compute_us, samples, probe_requests,
    warmup_requests, smoke_requests, benchmark_requests, own_successes, split_inexact)
SELECT %(cluster)s, 'node' || n, 'model' || (v / 2), (v %% 2)::text, m, 60, 60, 0, 6e5, 1e4,
    1e5 + (v * 7919 + n * 31) %% 400000, 1, 0, 0, 0, 0, 0, false
FROM generate_series(%(hour)s::timestamptz, %(hour)s::timestamptz + interval '59 minutes',
                     interval '1 minute') AS m,
     generate_series(1, %(nodes)s) AS n, generate_series(0, %(versions)s - 1) AS v
UNION ALL
SELECT %(cluster)s, 'node' || n, '', '', m, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, false
FROM generate_series(%(hour)s::timestamptz, %(hour)s::timestamptz + interval '59 minutes',
                     interval '1 minute') AS m, generate_series(1, %(nodes)s) AS n
"""


def _p95(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def _timed(fn, calls: int) -> list[float]:
    out = []
    for _ in range(calls):
        started = time.perf_counter()
        fn()
        out.append(time.perf_counter() - started)
    return out


def seed(args, until: datetime):
    from django.db import connection

    from deployments.models import TritonCluster, TritonNode
    from reports.models import CostWatermark
    from reports.services import _build_days

    cluster = TritonCluster.objects.create(
        name="bench", environment="production", node_hourly_cost=24
    )
    # Never contacted; each node's URL is its own (unique in a cluster).
    TritonNode.objects.bulk_create(
        TritonNode(cluster=cluster, name=f"node{n}", http_url=f"http://127.0.0.1:{40000 + n}")
        for n in range(1, args.nodes + 1)
    )
    since = until - timedelta(days=args.days)
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(
            HOUR_ROWS,
            {
                "cluster": cluster.pk,
                "since": since,
                "last": until - timedelta(hours=1),
                "nodes": args.nodes,
                "versions": args.versions,
            },
        )
        rows = cursor.rowcount
        cursor.execute("ANALYZE reports_costrollup")
    _build_days(since, until)
    CostWatermark.objects.create(name="hourly", until=until)
    print(f"seeded {rows:,} hour rows and their days in {time.perf_counter() - started:.0f} s")
    return cluster, since


def report_bench(args, since: datetime, until: datetime) -> None:
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client

    user = get_user_model().objects.create_user("bench-manager", is_superuser=True)
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(user)
    params = {"from": since.isoformat(), "to": until.isoformat(), "group_by": "model"}

    def api():
        answer = client.get("/api/v1/reports/cost/", params)
        assert answer.status_code == 200, answer.content[:300]
        return answer

    def plain():
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT model_name, SUM(cost_ticks) FROM reports_costrollup WHERE period = "
                "'hour' AND start >= %s AND start < %s GROUP BY model_name",
                [since, until],
            )
            return cursor.fetchall()

    rows = len(api().json()["rows"])  # warm: first-call imports and connections
    plain()
    api_s, sql_s = _timed(api, args.calls), _timed(plain, args.calls)
    print(f"report by model over {args.days} days ({rows} rows), {args.calls} calls:")
    for n, (api_one, sql_one) in enumerate(zip(api_s, sql_s, strict=True), 1):
        print(f"  call {n}: API {api_one * 1000:.0f} ms, plain SQL {sql_one * 1000:.0f} ms")
    print(
        f"  API p95 {_p95(api_s) * 1000:.0f} ms (goal <= 300), median "
        f"{statistics.median(api_s) * 1000:.0f} ms"
    )
    print(f"  plain SQL SUM over the hour rows: p95 {_p95(sql_s) * 1000:.0f} ms")
    print(f"  ratio API / plain SQL (p95): {_p95(api_s) / _p95(sql_s):.2f}")


def rollup_bench(args, cluster, hour: datetime) -> None:
    from django.db import connection

    from reports.services import cost_rollup_build

    with connection.cursor() as cursor:
        cursor.execute(
            MINUTE_ROWS,
            {"cluster": cluster.pk, "hour": hour, "nodes": args.nodes, "versions": args.versions},
        )
        rows = cursor.rowcount
        cursor.execute("ANALYZE telemetry_rollup")

    def plain():
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT node_name, model_name, version, SUM(compute_us), SUM(requests) "
                "FROM telemetry_rollup WHERE minute >= %s AND minute < %s GROUP BY 1, 2, 3",
                [hour, hour + timedelta(hours=1)],
            )
            return cursor.fetchall()

    plain()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    written = cost_rollup_build(since=hour, until=hour + timedelta(hours=1))
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    sql_s = statistics.median(_timed(plain, 5))
    print(f"hourly cost rollup of one hour ({rows:,} minute rows -> {written:,} cost rows):")
    print(f"  CPU {cpu:.2f} s in this process, wall {wall:.2f} s per hour of data")
    print(f"  plain SQL SUM over the same minute rows: {sql_s:.2f} s")
    print(f"  ratio rollup wall / plain SQL: {wall / sql_s:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--versions", type=int, default=200)
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()

    import django

    django.setup()
    from django.db import connection

    test_db = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        now = datetime.now(UTC)
        until = now.replace(minute=0, second=0, microsecond=0)
        cluster, since = seed(args, until)
        report_bench(args, since, until)
        rollup_bench(args, cluster, until - timedelta(hours=1))
    finally:
        connection.creation.destroy_test_db(test_db, verbosity=0)


if __name__ == "__main__":
    main()
