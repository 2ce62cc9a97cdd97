"""The cost overview chart: cost per bucket of time by team or model, stacked, with idle
and unknown as their own grey bands. Built with plotly's figure objects (server side)."""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime, timedelta

from reports.costing import TICKS_PER_UNIT
from reports.minutes import Line
from reports.selectors import Key6, fields_for, group_namer, only_lines, range_lines

TOP_GROUPS = 8  # the rest is drawn as one "other" band
IDLE_GREY, UNKNOWN_GREY = "#adb5bd", "#dee2e6"


def bucket_for(span: timedelta) -> timedelta:
    """Buckets that give the chart tens of points, whatever the range."""
    for limit, bucket in (
        (timedelta(hours=6), timedelta(minutes=5)),
        (timedelta(days=4), timedelta(hours=1)),
        (timedelta(days=100), timedelta(days=1)),
    ):
        if span <= limit:
            return bucket
    return timedelta(days=7)


def cost_series(
    *,
    since: datetime,
    until: datetime,
    group_by: str,
    models: set[str] | None = None,
    kind: str | None = None,
) -> dict:
    """{"starts": [...], "groups": {name: [ticks per bucket]}, "idle": [...], "unknown"}.

    With `models`, only those models' cost (idle and unknown belong to no model); with
    `kind`, only that cost kind's (idle and unknown have none)."""
    bucket = bucket_for(until - since)
    name = group_namer(group_by)
    by = fields_for(group_by, models)
    starts: list[datetime] = []
    groups: dict[str, list[int]] = defaultdict(list)
    idle, unknown = [], []
    at = since
    while at < until:
        lines: dict[Key6, Line] = range_lines(at, min(at + bucket, until), by=by)
        lines = only_lines(lines, models, kind)
        index = len(starts)
        starts.append(at)
        idle.append(sum(ln.cost_ticks for k, ln in lines.items() if k[2] == "idle"))
        unknown.append(sum(ln.cost_ticks for k, ln in lines.items() if k[2] == "unknown"))
        for key, line in lines.items():
            if key[2] == "model":
                label = " v".join(filter(None, name(key))) or "(no team)"
                series = groups[label]
                series.extend([0] * (index + 1 - len(series)))
                series[index] += line.cost_ticks
        at += bucket
    for series in groups.values():
        series.extend([0] * (len(starts) - len(series)))
    return {"starts": starts, "groups": dict(groups), "idle": idle, "unknown": unknown}


def _top(groups: dict[str, list[int]]) -> dict[str, list[int]]:
    ranked = sorted(groups, key=lambda g: (-sum(groups[g]), g))
    top = {g: groups[g] for g in ranked[:TOP_GROUPS]}
    rest = ranked[TOP_GROUPS:]
    if rest:
        top["other"] = [sum(groups[g][i] for g in rest) for i in range(len(groups[rest[0]]))]
    return top


def overview_figure(series: dict, *, currency: str) -> dict:
    """A plotly figure (as plain JSON data) of the series: stacked areas, idle in grey."""
    import plotly.graph_objects as go  # slow to import: only when a page draws a chart

    def money(ticks: list[int]) -> list[float]:
        return [round(t / TICKS_PER_UNIT, 4) for t in ticks]

    x = [s.isoformat() for s in series["starts"]]
    fig = go.Figure()
    for label, ticks in _top(series["groups"]).items():
        fig.add_trace(go.Scatter(x=x, y=money(ticks), name=label, stackgroup="cost"))
    for label, ticks, colour in (
        ("idle", series["idle"], IDLE_GREY),
        ("unknown (node not scraped)", series["unknown"], UNKNOWN_GREY),
    ):
        if any(ticks):
            fig.add_trace(
                go.Scatter(
                    x=x, y=money(ticks), name=label, stackgroup="cost", line={"color": colour}
                )
            )
    fig.update_layout(
        margin={"t": 16, "r": 16, "b": 40, "l": 64},
        yaxis={"title": {"text": f"cost per interval ({currency})"}, "rangemode": "tozero"},
        legend={"orientation": "h", "y": -0.2},
        hovermode="x unified",
    )
    return json.loads(fig.to_json())
