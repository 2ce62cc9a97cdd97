"""Rollup time series at the resolution their range calls for (telemetry/resolution.py).

A range of up to about 33 hours comes as minute rollups; longer ones as sums over 5-minute,
hourly or daily buckets aligned on the epoch, so no series is more than about
`resolution.MAX_POINTS_PER_SERIES` points. Rates are requests over the minutes of the bucket
that had a row (the minutes the version was served); p99 is the bucket's worst minute.
"""

from __future__ import annotations

from datetime import datetime

from django.db.models import Avg, Count, DateTimeField, F, Func, Max, Sum, Value
from django.utils import timezone

from telemetry import resolution
from telemetry.models import Rollup

# However many series a query matches, one answer holds at most this many points.
MAX_POINTS = 40000


class _Bin(Func):
    """date_bin(<step> seconds, minute, epoch): the bucket a minute falls in (PostgreSQL 14+)."""

    output_field = DateTimeField()

    def __init__(self, expression, *, seconds: int):
        template = (
            f"date_bin('{int(seconds)} seconds'::interval, %(expressions)s, "
            "TIMESTAMPTZ '1970-01-01 00:00:00+00')"
        )
        super().__init__(expression, template=template)


def _bucket(step: resolution.Step):
    """The rows' bucket: the minute itself at minute resolution, else its date_bin."""
    return F("minute") if step == resolution.MINUTE else _Bin(F("minute"), seconds=step.seconds)


def _ratio(num, den, scale=1.0):
    return round(num / den * scale, 3) if num is not None and den else None


def _filtered(rows, **filters: str):
    for field, value in filters.items():
        if value:
            rows = rows.filter(**{field: value})
    return rows


def pick_step(*, since: datetime, until: datetime | None, series: int) -> resolution.Step:
    """The resolution of a range that `series` series share, within both point budgets."""
    span_s = ((until or timezone.now()) - since).total_seconds()
    budget = min(resolution.MAX_POINTS_PER_SERIES, MAX_POINTS // max(series, 1))
    return resolution.step_for(span_s, max_points=max(budget, 1))


def _model_rows(*, since, until, cluster, model, version, node):
    rows = Rollup.objects.filter(minute__gte=since).exclude(model_name="")
    if until is not None:
        rows = rows.filter(minute__lt=until)
    return _filtered(rows, cluster__name=cluster, model_name=model, version=version, node_name=node)


def _model_point(row: dict) -> dict:
    requests, successes = row["requests"] or 0, row["successes"] or 0
    # Latency sums cover every request, own ones too (telemetry/own_split.py).
    answered = successes + (row["own_successes"] or 0)
    return {
        "ts": row["bucket"].isoformat(),
        "cluster": row["cluster__name"],
        "model": row["model_name"],
        "version": row["version"],
        "requests": requests,
        "failures": row["failures"] or 0,
        "request_rate": round(requests / (60.0 * max(row["minutes"], 1)), 3),
        "success_rate": _ratio(successes, requests, 100.0),
        "avg_ms": _ratio(row["request_us"], answered, 1e-3),
        "queue_ms": _ratio(row["queue_us"], answered, 1e-3),
        "compute_ms": _ratio(row["compute_us"], answered, 1e-3),
        "p99_ms": row["p99_ms"],
    }


def model_series(
    *,
    since: datetime,
    until: datetime | None = None,
    cluster: str = "",
    model: str = "",
    version: str = "",
    node: str = "",
    step: resolution.Step | None = None,
) -> tuple[resolution.Step, list[dict]]:
    """(step, points per (bucket, cluster, model, version)), summed over nodes unless
    `node`, oldest first; the step is picked for the range unless given."""
    rows = _model_rows(
        since=since, until=until, cluster=cluster, model=model, version=version, node=node
    )
    if step is None:
        keys = rows.values("cluster_id", "model_name", "version").distinct().count()
        step = pick_step(since=since, until=until, series=keys)
    grouped = (
        rows.annotate(bucket=_bucket(step))
        .values("bucket", "cluster__name", "model_name", "version")
        .annotate(
            requests=Sum("requests"),
            successes=Sum("successes"),
            own_successes=Sum("own_successes"),
            failures=Sum("failures"),
            request_us=Sum("request_us"),
            queue_us=Sum("queue_us"),
            compute_us=Sum("compute_us"),
            p99_ms=Max("p99_ms"),
            # A minute bucket holds one minute: no distinct count (a sort) for the common case.
            minutes=Value(1) if step == resolution.MINUTE else Count("minute", distinct=True),
        )
        .order_by("bucket", "cluster__name", "model_name", F("version").asc())
    )
    return step, [_model_point(row) for row in grouped[:MAX_POINTS]]


def node_series(
    *, since: datetime, cluster: str, node: str = "", step: resolution.Step | None = None
) -> tuple[resolution.Step, list[dict]]:
    """(step, CPU and GPU utilization averages of each node of a cluster per bucket)."""
    rows = _filtered(
        Rollup.objects.filter(minute__gte=since, cluster__name=cluster, model_name=""),
        node_name=node,
    )
    if step is None:
        step = pick_step(
            since=since, until=None, series=rows.values("node_name").distinct().count()
        )
    grouped = (
        rows.annotate(bucket=_bucket(step))
        .values("bucket", "node_name")
        .annotate(cpu=Avg("cpu_util_avg"), gpu=Avg("gpu_util_avg"))
        .order_by("bucket", "node_name")
    )
    points = [
        {
            "ts": r["bucket"].isoformat(),
            "node": r["node_name"],
            "cpu_util": r["cpu"],
            "gpu_util": r["gpu"],
        }
        for r in grouped[:MAX_POINTS]
    ]
    return step, points


MODEL_FIELDS = ("requests", "failures", "request_rate", "success_rate", "avg_ms", "queue_ms")
MODEL_FIELDS += ("compute_ms", "p99_ms")
NODE_FIELDS = ("cpu_util", "gpu_util")


def as_columns(points: list[dict], *, keys: tuple[str, ...], fields: tuple[str, ...]) -> list[dict]:
    """Points regrouped as one object per series (`keys` name it) holding arrays: `t` (epoch
    seconds) and one array per field, so a chart draws each series in one call."""
    out: dict[tuple, dict] = {}
    for p in points:
        key = tuple(p[k] for k in keys)
        series = out.get(key)
        if series is None:
            series = out[key] = {**dict(zip(keys, key, strict=True)), "t": []}
            series.update({f: [] for f in fields})
        series["t"].append(datetime.fromisoformat(p["ts"]).timestamp())
        for f in fields:
            series[f].append(p[f])
    return list(out.values())
