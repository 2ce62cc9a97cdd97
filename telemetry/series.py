"""Rollup time series at the resolution their range calls for (telemetry/resolution.py).

A range of up to about 33 hours comes as minute rollups; longer ones as sums over 5-minute,
hourly or daily buckets aligned on the epoch, so no series is more than about
`resolution.MAX_POINTS_PER_SERIES` points. Rates are requests over the minutes of the bucket
that had a row (the minutes the version was served); p99 is the bucket's worst minute.

PostgreSQL computes every figure and writes the answer's JSON itself (a day of 20 series is
28,800 points: building a Python object per point cost more than the query), so the API
passes the text through and Python callers parse it once.
"""

from __future__ import annotations

import json
from datetime import datetime

from django.db import connection
from django.db.models import Avg, Count, DateTimeField, F, Func, Max, Sum, Value
from django.utils import timezone

from telemetry import resolution
from telemetry.models import Rollup

# However many series a query matches, one answer holds at most this many points.
MAX_POINTS = 40000

MODEL_KEYS = ("cluster", "model", "version")
MODEL_FIELDS = ("requests", "failures", "request_rate", "success_rate", "avg_ms", "queue_ms")
MODEL_FIELDS += ("compute_ms", "p99_ms", "tokens_per_s")
NODE_FIELDS = ("cpu_util", "gpu_util")


def _round(expr: str, places: int = 3) -> str:
    """`expr` rounded to `places` decimals in float8 arithmetic (numeric's exact rounding
    cost more than the rest of the answer; the shortest float output prints 12.933)."""
    scale = 10**places
    return f"(round(({expr})::float8 * {scale}) / {scale})"


def _ratio(num: str, den: str, scale: str = "1.0") -> str:
    """num / den x scale to 3 decimals, null where den is 0."""
    return _round(f"{num}::float8 * {scale} / NULLIF({den}, 0)::float8")


# Each figure as SQL over one grouped row `g` (_model_grouped's columns). Latency sums
# cover every request, own ones too (telemetry/own_split.py).
_ANSWERED = "(g.successes + g.own_successes)"
MODEL_SQL = {
    "requests": "g.requests",
    "failures": "g.failures",
    "request_rate": _round("g.requests::float8 / (60 * g.minutes)"),
    "success_rate": _ratio("g.successes", "g.requests", "100.0"),
    "avg_ms": _ratio("g.request_us", _ANSWERED, "0.001"),
    "queue_ms": _ratio("g.queue_us", _ANSWERED, "0.001"),
    "compute_ms": _ratio("g.compute_us", _ANSWERED, "0.001"),
    "p99_ms": _round("g.p99_ms"),
    # A generative model's output tokens a second (its own counter); null where it counts none.
    "tokens_per_s": _round("NULLIF(g.output_tokens, 0)::float8 / (60 * g.minutes)"),
}
# Utilization is a share of 1: four decimals are a hundredth of a percent.
NODE_SQL = {"cpu_util": _round("g.cpu", 4), "gpu_util": _round("g.gpu", 4)}


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


def _filtered(rows, **filters: str):
    for field, value in filters.items():
        if value:
            rows = rows.filter(**{field: value})
    return rows


def pick_step(
    *,
    since: datetime,
    until: datetime | None,
    series: int,
    max_points: int = resolution.MAX_POINTS_PER_SERIES,
) -> resolution.Step:
    """The resolution of a range that `series` series share, within both point budgets and
    at most `max_points` a series (a chart asks for about its width in pixels: more points
    than pixels draw nothing more)."""
    span_s = ((until or timezone.now()) - since).total_seconds()
    budget = min(resolution.MAX_POINTS_PER_SERIES, max_points, MAX_POINTS // max(series, 1))
    return resolution.step_for(span_s, max_points=max(budget, 1))


def _model_rows(*, since, until, cluster, model, version, node):
    rows = Rollup.objects.filter(minute__gte=since).exclude(model_name="")
    if until is not None:
        rows = rows.filter(minute__lt=until)
    return _filtered(rows, cluster__name=cluster, model_name=model, version=version, node_name=node)


def _model_grouped(*, since, until, cluster, model, version, node, step, max_points):
    """(step, the grouped rows' SQL and parameters): one row per (bucket, cluster, model,
    version), oldest first."""
    rows = _model_rows(
        since=since, until=until, cluster=cluster, model=model, version=version, node=node
    )
    if step is None:
        keys = rows.values("cluster_id", "model_name", "version").distinct().count()
        step = pick_step(since=since, until=until, series=keys, max_points=max_points)
    grouped = (
        rows.annotate(bucket=_bucket(step), cluster_name=F("cluster__name"))
        .values("bucket", "cluster_name", "model_name", "version")
        .annotate(
            requests=Sum("requests"),
            successes=Sum("successes"),
            own_successes=Sum("own_successes"),
            failures=Sum("failures"),
            request_us=Sum("request_us"),
            queue_us=Sum("queue_us"),
            compute_us=Sum("compute_us"),
            output_tokens=Sum("output_tokens"),
            p99_ms=Max("p99_ms"),
            # A minute bucket holds one minute: no distinct count (a sort) for the common case.
            minutes=Value(1) if step == resolution.MINUTE else Count("minute", distinct=True),
        )
        .order_by("bucket", "cluster_name", "model_name", F("version").asc())
    )
    return step, grouped[:MAX_POINTS].query.sql_with_params()


def _node_grouped(*, since, cluster, node, step, max_points):
    rows = _filtered(
        Rollup.objects.filter(minute__gte=since, cluster__name=cluster, model_name=""),
        node_name=node,
    )
    if step is None:
        nodes = rows.values("node_name").distinct().count()
        step = pick_step(since=since, until=None, series=nodes, max_points=max_points)
    grouped = (
        rows.annotate(bucket=_bucket(step), cluster_name=F("cluster__name"))
        .values("bucket", "cluster_name", "node_name")
        .annotate(cpu=Avg("cpu_util_avg"), gpu=Avg("gpu_util_avg"))
        .order_by("bucket", "node_name")
    )
    return step, grouped[:MAX_POINTS].query.sql_with_params()


# The SQL below is built from this module's constants only (figure and key names and
# expressions from MODEL_SQL, NODE_SQL and the key maps); every value is a parameter.


def _points_json(grouped, keys: dict[str, str], figures: dict[str, str]) -> str:
    """A JSON array of points, oldest first: `ts` (ISO 8601), the keys, the figures."""
    sql, params = grouped
    pairs = ", ".join(
        f"'{name}', {expr}" for name, expr in {"ts": "g.bucket", **keys, **figures}.items()
    )
    order = ", ".join(["g.bucket", *keys.values()])
    outer = f"SELECT coalesce(json_agg(json_build_object({pairs}) ORDER BY {order}), '[]')::text"
    return _json(f"{outer} FROM ({sql}) g", params)  # noqa: S608 (see above)


def _columns_json(grouped, keys: dict[str, str], figures: dict[str, str]) -> str:
    """A JSON array of series, one per distinct `keys`, each holding arrays: `t` (the
    buckets' starts in whole epoch seconds) and one array per figure, oldest first, so a
    chart draws each series in one call and the answer carries only what it draws."""
    sql, params = grouped
    columns = [f"{expr} AS {name}" for name, expr in keys.items()]
    columns.append("array_agg(date_part('epoch', g.bucket)::bigint ORDER BY g.bucket) AS t")
    columns += [f"array_agg({expr} ORDER BY g.bucket) AS {name}" for name, expr in figures.items()]
    by = ", ".join(str(i + 1) for i in range(len(keys)))
    inner = f"SELECT {', '.join(columns)} FROM ({sql}) g GROUP BY {by}"  # noqa: S608 (see above)
    order = ", ".join(f"s.{k}" for k in keys)
    outer = f"SELECT coalesce(json_agg(s ORDER BY {order}), '[]')::text"
    return _json(f"{outer} FROM ({inner}) s", params)  # noqa: S608 (see above)


def _json(sql: str, params) -> str:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()[0]


_MODEL_KEYS_SQL = {"cluster": "g.cluster_name", "model": "g.model_name", "version": "g.version"}
_NODE_KEYS_SQL = {"cluster": "g.cluster_name", "node": "g.node_name"}


def _written(grouped, keys: dict[str, str], known: dict[str, str], *, shape: str, fields) -> str:
    """The grouped rows as JSON points, or as arrays per series (`shape="series"`), holding
    the SQL of `fields` (all of `known` when empty), only ever taken from `known`."""
    figures = {f: known[f] for f in fields} if fields else dict(known)
    write = _columns_json if shape == "series" else _points_json
    return write(grouped, keys, figures)


def model_series(**where) -> tuple[resolution.Step, list[dict]]:
    """(step, points per (bucket, cluster, model, version)), summed over nodes unless
    `node`, oldest first; the step is picked for the range unless given. Takes
    `model_json`'s arguments but `shape` and `fields` (every figure)."""
    step, text = model_json(**where)
    return step, json.loads(text)


def model_json(
    *,
    since: datetime,
    until: datetime | None = None,
    cluster: str = "",
    model: str = "",
    version: str = "",
    node: str = "",
    step: resolution.Step | None = None,
    shape: str = "points",
    fields: tuple[str, ...] = (),
    max_points: int = resolution.MAX_POINTS_PER_SERIES,
) -> tuple[resolution.Step, str]:
    """(step, JSON text): `model_series`'s points, or with `shape="series"` one object per
    (cluster, model, version) holding arrays; only `fields` (all when empty)."""
    step, grouped = _model_grouped(
        since=since,
        until=until,
        cluster=cluster,
        model=model,
        version=version,
        node=node,
        step=step,
        max_points=max_points,
    )
    return step, _written(grouped, _MODEL_KEYS_SQL, MODEL_SQL, shape=shape, fields=fields)


def node_series(
    *, since: datetime, cluster: str, node: str = "", step: resolution.Step | None = None
) -> tuple[resolution.Step, list[dict]]:
    """(step, CPU and GPU utilization averages of each node of a cluster per bucket)."""
    step, text = node_json(since=since, cluster=cluster, node=node, step=step)
    return step, json.loads(text)


def node_json(
    *,
    since: datetime,
    cluster: str,
    node: str = "",
    step: resolution.Step | None = None,
    shape: str = "points",
    fields: tuple[str, ...] = (),
    max_points: int = resolution.MAX_POINTS_PER_SERIES,
) -> tuple[resolution.Step, str]:
    """(step, JSON text): `node_series`'s points, or with `shape="series"` one object per
    node holding arrays; only `fields` (all when empty)."""
    step, grouped = _node_grouped(
        since=since, cluster=cluster, node=node, step=step, max_points=max_points
    )
    return step, _written(grouped, _NODE_KEYS_SQL, NODE_SQL, shape=shape, fields=fields)


def answer(
    *,
    kind: str,
    shape: str,
    since: datetime,
    cluster: str = "",
    model: str = "",
    version: str = "",
    node: str = "",
    fields: tuple[str, ...] = (),
    max_points: int = resolution.MAX_POINTS_PER_SERIES,
) -> tuple[resolution.Step, str]:
    """What GET /api/v1/metrics/ answers, as JSON text: model or node figures (`kind`) as
    points or as arrays per series (`shape`), holding only `fields` (all when empty), at
    most `max_points` a series."""
    if kind == "node":
        return node_json(
            since=since,
            cluster=cluster,
            node=node,
            shape=shape,
            fields=fields,
            max_points=max_points,
        )
    return model_json(
        max_points=max_points,
        since=since,
        cluster=cluster,
        model=model,
        version=version,
        node=node,
        shape=shape,
        fields=fields,
    )
