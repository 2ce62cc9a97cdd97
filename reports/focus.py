"""The cost report as FinOps FOCUS 1.0 rows (GET /api/v1/reports/cost/?format=focus).

FOCUS (the FinOps Open Cost and Usage Specification) names the columns finance tools
import. One row per charge period (a stored day, a stored hour, or the hour of the minutes
computed live, cut at the range's ends), node, kind (a model version's share, idle,
unknown) and model version; amounts in cents that add up to the report's `total_cost`.
docs/COSTS.md maps each column to where its value comes from.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal

from django.conf import settings

from deployments.models import TritonCluster
from deployments.temporary import COST_KINDS
from models_registry.models import Model
from reports.costing import TICKS_PER_UNIT, to_cents
from reports.minutes import Line, cost_lines
from reports.models import CostRollup
from reports.selectors import clip_range, range_segments
from reports.services import DAY, HOUR, floor_hour, floor_month, next_month

FOCUS_VERSION = "1.0"


@dataclass(frozen=True)
class FocusColumn:
    """A column as the specification defines it: its type, whether it must be present
    (Mandatory) or is present because Switchyard has what it describes (Conditional,
    Recommended), whether it may be null, and its allowed values where the spec lists them."""

    name: str
    type: str  # "Decimal", "String", "DateTime" (ISO 8601, UTC), "JSON" (an object)
    requirement: str  # "Mandatory", "Conditional", "Recommended", "Custom" (x_ columns)
    nullable: bool = False
    allowed: tuple[str, ...] = ()


_M, _C, _R, _X = "Mandatory", "Conditional", "Recommended", "Custom"
# Every column the export writes, in its order (FOCUS 1.0 columns, then Switchyard's x_).
COLUMNS = (
    FocusColumn("BilledCost", "Decimal", _M),
    FocusColumn("BillingAccountId", "String", _M),
    FocusColumn("BillingAccountName", "String", _M),
    FocusColumn("BillingCurrency", "String", _M),
    FocusColumn("BillingPeriodEnd", "DateTime", _M),
    FocusColumn("BillingPeriodStart", "DateTime", _M),
    FocusColumn("ChargeCategory", "String", _M, allowed=("Usage",)),
    FocusColumn("ChargeClass", "String", _M, nullable=True, allowed=("Correction",)),
    FocusColumn("ChargeDescription", "String", _M),
    FocusColumn("ChargeFrequency", "String", _R, allowed=("One-Time", "Recurring", "Usage-Based")),
    FocusColumn("ChargePeriodEnd", "DateTime", _M),
    FocusColumn("ChargePeriodStart", "DateTime", _M),
    FocusColumn("ConsumedQuantity", "Decimal", _C),
    FocusColumn("ConsumedUnit", "String", _C),
    FocusColumn("ContractedCost", "Decimal", _M),
    FocusColumn("ContractedUnitPrice", "Decimal", _C),
    FocusColumn("EffectiveCost", "Decimal", _M),
    FocusColumn("InvoiceIssuerName", "String", _M),
    FocusColumn("ListCost", "Decimal", _M),
    FocusColumn("ListUnitPrice", "Decimal", _C),
    FocusColumn("PricingQuantity", "Decimal", _M, nullable=True),
    FocusColumn("PricingUnit", "String", _M, nullable=True),
    FocusColumn("ProviderName", "String", _M),
    FocusColumn("PublisherName", "String", _M),
    FocusColumn("ResourceId", "String", _C),
    FocusColumn("ResourceName", "String", _C),
    FocusColumn("ResourceType", "String", _C),
    FocusColumn("ServiceCategory", "String", _M, allowed=("AI and Machine Learning",)),
    FocusColumn("ServiceName", "String", _M),
    FocusColumn("SubAccountId", "String", _C, nullable=True),
    FocusColumn("SubAccountName", "String", _C, nullable=True),
    FocusColumn("Tags", "JSON", _C),
    FocusColumn("x_Share", "String", _X, allowed=("model", "idle", "unknown")),
    FocusColumn("x_CostKind", "String", _X, nullable=True, allowed=COST_KINDS),
    FocusColumn("x_Cluster", "String", _X),
    FocusColumn("x_Node", "String", _X),
    FocusColumn("x_Model", "String", _X, nullable=True),
    FocusColumn("x_Version", "String", _X, nullable=True),
    FocusColumn("x_Requests", "Decimal", _X),
    FocusColumn("x_Successes", "Decimal", _X),
    FocusColumn("x_ComputeHours", "Decimal", _X),
)
COLUMN_NAMES = tuple(c.name for c in COLUMNS)

# Switchyard bills its own fleet: it is the provider, publisher and invoice issuer, and
# its one billing account; teams are the sub-accounts that pay for their models.
PROVIDER = "Switchyard"
ACCOUNT_ID = "switchyard"
SERVICE_NAME = "Switchyard Triton inference"
# The columns of the same value on every row.
FIXED = {
    "BillingAccountId": ACCOUNT_ID,
    "BillingAccountName": PROVIDER,
    "ChargeCategory": "Usage",
    "ChargeClass": None,
    "ChargeFrequency": "Usage-Based",
    "ConsumedUnit": "Hours",
    "InvoiceIssuerName": PROVIDER,
    "PricingUnit": "Hours",
    "ProviderName": PROVIDER,
    "PublisherName": PROVIDER,
    "ServiceCategory": "AI and Machine Learning",
    "ServiceName": SERVICE_NAME,
}
QUANTITY = Decimal("0.000001")
KIND_ORDER = {"model": 0, "idle": 1, "unknown": 2}

# (period start, period end, cluster id, node, kind, model, version, cost kind)
ChargeKey = tuple[datetime, datetime, int, str, str, str, str, str]


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _ceil_hour(at: datetime) -> datetime:
    return at if floor_hour(at) == at else floor_hour(at) + HOUR


def charge_lines(since: datetime, until: datetime) -> dict[ChargeKey, Line]:
    """Cost lines of [since, until) per charge period: stored days and hours as stored,
    the rest per hour computed live (cut at the range's ends)."""
    lines: dict[ChargeKey, Line] = defaultdict(Line)
    for source, a, b in range_segments(since, until):
        if source == "live":  # hours of the clock: the first one cut where the range starts
            for c, d in ((a, min(b, _ceil_hour(a))), (_ceil_hour(a), b)):
                if c < d:
                    for (cid, node, at, *rest), line in cost_lines(c, d, bucket=HOUR).items():
                        lines[(at, min(at + HOUR, d), cid, node, *rest)].add(line)
            continue
        step = DAY if source == "day" else HOUR
        rows = CostRollup.objects.filter(period=source, start__gte=a, start__lt=b).values_list(
            "start", "cluster_id", "node_name", "kind", "model_name", "version", "cost_kind",
            "cost_ticks", "idle_share_ticks", "requests", "successes", "compute_us", "minutes",
            "output_tokens",
        )  # fmt: skip
        for start, cid, node, kind, model, version, cost_kind, *amounts in rows.iterator(
            chunk_size=5000
        ):
            key = (start, start + step, cid, node, kind, model, version, cost_kind)
            lines[key].add(Line(*amounts))
    return dict(lines)


def _decimal(value: float | Decimal) -> str:
    return str(Decimal(value).quantize(QUANTITY, ROUND_HALF_UP))


def focus_export(
    *, since: datetime, until: datetime, models: set[str] | None = None, now=None
) -> dict:
    """The FOCUS rows of [since, until) (the same minutes as cost_report), BilledCost in
    cents adding up to the report's total; with `models`, only those models' rows."""
    since, until = clip_range(since, until, now)
    lines = charge_lines(since, max(since, until))
    node_ticks: dict[tuple, int] = defaultdict(int)
    node_minutes: dict[tuple, int] = defaultdict(int)
    for (start, end, cid, node, kind, *_), line in lines.items():
        node_ticks[(start, end, cid, node)] += line.cost_ticks
        if kind != "model":  # a node-minute is idle (with telemetry) or unknown, once
            node_minutes[(start, end, cid, node)] += line.minutes
    if models is not None:
        lines = {k: v for k, v in lines.items() if k[4] == "model" and k[5] in models}
    cents = to_cents({key: line.cost_ticks for key, line in lines.items()})
    names = {
        "clusters": dict(TritonCluster.objects.values_list("id", "name")),
        "teams": dict(Model.objects.values_list("name", "team__name")),
    }
    order = sorted(lines, key=lambda k: (k[0], k[2], k[3], KIND_ORDER[k[4]], k[5], k[6], k[7]))
    rows = []
    for key in order:
        node = key[:4]
        hourly = (
            Decimal(node_ticks[node]) * 60 / node_minutes[node] / TICKS_PER_UNIT
            if node_minutes[node]
            else Decimal(0)
        )
        rows.append(_row(key, lines[key], cents[key], hourly, names))
    return {"columns": COLUMN_NAMES, "rows": rows}


def _row(key: ChargeKey, line: Line, cost: Decimal, hourly: Decimal, names) -> dict:
    start, end, cid, node, kind, model, version, cost_kind = key
    cluster = names["clusters"].get(cid, str(cid))
    team = names["teams"].get(model) if kind == "model" else None
    where = f"{cluster}/{node}"
    # Node-hours the row pays for at the node's average price in the period.
    hours = Decimal(line.cost_ticks) / TICKS_PER_UNIT / hourly if hourly else Decimal(0)
    resource = {
        "model": (f"{where}/{model}/{version}", f"{model} v{version} on {where}", "Model version"),
        "idle": (where, where, "Node"),
        "unknown": (where, where, "Node"),
    }[kind]
    work = {"validation": "smoke tests'", "benchmark": "benchmarks'"}.get(cost_kind, "serving")
    description = {
        "model": f"{model} v{version} on {where}: its {work} share of the node's time by compute",
        "idle": f"Idle time of node {where}: paid for, used by no model",
        "unknown": f"Time of node {where} without telemetry: paid for, charged to no model",
    }[kind]
    tags = {"cluster": cluster, "node": node, "share": kind}
    if kind == "model":
        tags.update(team=team or "", model=model, version=version, cost_kind=cost_kind)
    money = str(cost)
    return {
        **FIXED,
        "BilledCost": money,
        "BillingCurrency": settings.SWITCHYARD_CURRENCY,
        "BillingPeriodEnd": _iso(next_month(start)),
        "BillingPeriodStart": _iso(floor_month(start)),
        "ChargeDescription": description,
        "ChargePeriodEnd": _iso(end),
        "ChargePeriodStart": _iso(start),
        "ConsumedQuantity": _decimal(hours),
        "ContractedCost": money,
        "ContractedUnitPrice": _decimal(hourly),
        "EffectiveCost": money,
        "ListCost": money,
        "ListUnitPrice": _decimal(hourly),
        "PricingQuantity": _decimal(hours),
        "ResourceId": resource[0],
        "ResourceName": resource[1],
        "ResourceType": resource[2],
        "SubAccountId": team,
        "SubAccountName": team,
        "Tags": json.dumps(tags, sort_keys=True),
        "x_Share": kind,
        "x_CostKind": cost_kind or None,
        "x_Cluster": cluster,
        "x_Node": node,
        "x_Model": model or None,
        "x_Version": version or None,
        "x_Requests": line.requests,
        "x_Successes": line.successes,
        "x_ComputeHours": _decimal(line.compute_us / 3.6e9),
    }
