"""The cost report in the FinOps FOCUS format, read from the real API over real collector
minutes: stored days, stored hours and live minutes, each column of the right type."""

import csv
import dataclasses
import io
import json
from datetime import datetime, timedelta, timezone
from decimal import Decimal, InvalidOperation

import pytest
from rest_framework.test import APIClient

from reports.focus import COLUMNS
from reports.services import DAY, cost_rollup_build, floor_day
from telemetry.services import rollups_write
from tests.reports.conftest import write_scraped

pytestmark = pytest.mark.django_db


def _is_type(kind: str, value: str) -> bool:
    if kind == "Decimal":
        try:
            Decimal(value)
        except InvalidOperation:
            return False
        return "e" not in value.lower() and "," not in value
    if kind == "DateTime":  # ISO 8601 in UTC, as FOCUS writes it
        return value.endswith("Z") and datetime.fromisoformat(value[:-1] + "+00:00") is not None
    if kind == "JSON":
        return isinstance(json.loads(value), dict)
    return isinstance(value, str)


def _check(row: dict) -> list[str]:
    problems = []
    for column in COLUMNS:
        value = row[column.name]
        if value == "":
            if not column.nullable:
                problems.append(f"{column.name} is empty")
            continue
        if not _is_type(column.type, value):
            problems.append(f"{column.name}={value!r} is not a {column.type}")
        if column.allowed and value not in column.allowed:
            problems.append(f"{column.name}={value!r} is not one of {column.allowed}")
    return problems


@pytest.mark.triton
def test_the_focus_export_has_every_required_column_and_adds_up_to_the_report(scraped, make_user):
    start, names = write_scraped(scraped)
    _, rows, _, _ = scraped
    # The same real minutes two days earlier, rolled up: the export reads stored days too.
    assert rollups_write(rows=[dataclasses.replace(r, minute=r.minute - 2 * 86400) for r in rows])
    since = start - 2 * DAY + timedelta(minutes=2)  # inside the telemetry, off the hour
    cost_rollup_build(since=floor_day(since))
    client = APIClient()
    client.force_authenticate(make_user("mia", role="managers"))
    params = {"from": since.isoformat(), "to": (start + timedelta(minutes=7)).isoformat()}

    answer = client.get("/api/v1/reports/cost/", {**params, "format": "focus"})
    assert answer.status_code == 200 and answer["Content-Type"].startswith("text/csv")
    reader = csv.DictReader(io.StringIO(answer.content.decode()))
    mandatory = [c.name for c in COLUMNS if c.requirement == "Mandatory"]
    assert set(mandatory) <= set(reader.fieldnames)
    assert reader.fieldnames == [c.name for c in COLUMNS]
    charges = list(reader)
    assert charges and [p for row in charges for p in _check(row)] == []

    report = client.get("/api/v1/reports/cost/", {**params, "group_by": "node"}).json()
    billed = sum(Decimal(row["BilledCost"]) for row in charges)
    assert billed == Decimal(str(report["total_cost"])).quantize(Decimal("0.01"))
    shares = {r["x_Share"] for r in charges}
    assert shares == {"model", "idle", "unknown"}  # the node was killed: unknown minutes too
    assert {r["x_CostKind"] for r in charges if r["x_Share"] == "model"} == {"serving"}
    assert {r["x_CostKind"] for r in charges if r["x_Share"] != "model"} == {""}

    periods = [
        (
            datetime.fromisoformat(r["ChargePeriodStart"]),
            datetime.fromisoformat(r["ChargePeriodEnd"]),
        )
        for r in charges
    ]
    assert min(a for a, _ in periods) == since
    assert {b - a for a, b in periods} >= {DAY, timedelta(hours=1)}  # stored days and hours
    if since.minute:  # the first period is cut where the range starts
        assert min(periods)[1] - since < timedelta(hours=1)
    busy = [r for r in charges if r["x_Model"] == names["busy"]]
    assert busy and {r["ResourceType"] for r in busy} == {"Model version"}
    tags = json.loads(busy[0]["Tags"])
    assert (
        tags["model"] == names["busy"] and tags["version"] == "1" and tags["cluster"] == "cost-lab"
    )
    assert sum(int(r["x_Requests"]) for r in busy) > 0

    elsewhere = since.astimezone(timezone(timedelta(hours=2)))  # the same range, as +02:00
    again = client.get(
        "/api/v1/reports/cost/", {**params, "from": elsewhere.isoformat(), "format": "focus"}
    )
    assert again.content == answer.content

    plain = client.get("/api/v1/reports/cost/", {**params, "format": "csv"})
    assert plain.content.decode().splitlines()[0].startswith("model,cost,serving_cost")  # its own


def test_a_bad_format_is_refused_naming_it(make_user):
    client = APIClient()
    client.force_authenticate(make_user("mia", role="managers"))
    answer = client.get("/api/v1/reports/cost/", {"format": "focus2"})
    assert answer.status_code == 400 and answer.json()["errors"][0]["field"] == "format"
