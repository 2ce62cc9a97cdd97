"""Cost reports (API.md: GET /api/v1/reports/cost/ and /api/v1/reports/ghosts/)."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta

from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import BasePermission
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts import inputs
from accounts.errors import errors_response
from accounts.roles import Role, user_has_role
from deployments.temporary import COST_KINDS
from models_registry.models import Team
from reports import selectors, services
from reports.focus import focus_export

MAX_RANGE = timedelta(days=400)


class ReportsRead(BasePermission):
    """Managers, release managers and superusers read every row; the algorithm team reads
    the rows of its own teams' models (`visible_models`)."""

    message = "Reports need the managers, release-managers or algorithm role."

    def has_permission(self, request, view) -> bool:
        return selectors.may_read_reports(request.user)


visible_models = selectors.visible_models


class CostRowSerializer(serializers.Serializer):
    """One group of a cost report; only the grouping's keys are present."""

    model = serializers.CharField(required=False)
    version = serializers.CharField(required=False)
    team = serializers.CharField(required=False)
    cluster = serializers.CharField(required=False)
    node = serializers.CharField(required=False)
    cost = serializers.FloatField(help_text="serving_cost + validation_cost + benchmark_cost")
    serving_cost = serializers.FloatField(help_text="node time of the version serving clients")
    validation_cost = serializers.FloatField(help_text="node time of its smoke tests")
    benchmark_cost = serializers.FloatField(help_text="node time of its benchmarks")
    idle_cost = serializers.FloatField(required=False, help_text="cluster and node groupings")
    unknown_cost = serializers.FloatField(required=False, help_text="cluster and node groupings")
    shared_idle = serializers.FloatField(required=False, help_text="with share_idle")
    share = serializers.FloatField()
    requests = serializers.IntegerField()
    successes = serializers.IntegerField()
    compute_hours = serializers.FloatField()
    cost_per_1k = serializers.FloatField(allow_null=True)
    output_tokens = serializers.IntegerField(
        help_text="A generative model's output tokens while serving (its own counter, "
        "`vllm:generation_tokens_total`); 0 for one that counts none."
    )
    cost_per_1k_tokens = serializers.FloatField(
        allow_null=True, help_text="Serving cost per 1,000 output tokens; null without tokens."
    )
    change_pct = serializers.FloatField(allow_null=True)


class CostReportSerializer(serializers.Serializer):
    from_ = serializers.CharField(help_text="ISO 8601")
    to = serializers.CharField(help_text="ISO 8601")
    group_by = serializers.CharField()
    currency = serializers.CharField()
    total_cost = serializers.FloatField()
    idle_cost = serializers.FloatField()
    unknown_cost = serializers.FloatField()
    rows = CostRowSerializer(many=True)

    def get_fields(self):
        fields = super().get_fields()
        fields["from"] = fields.pop("from_")  # a keyword in Python, a field in the answer
        return fields


class GhostRowSerializer(serializers.Serializer):
    model = serializers.CharField()
    version = serializers.CharField()
    cluster = serializers.CharField()
    nodes = serializers.ListField(
        child=serializers.CharField(), help_text="the nodes it occupies without client traffic"
    )
    node_count = serializers.IntegerField()
    days_loaded = serializers.FloatField(help_text="on the node where it was loaded longest")
    cost = serializers.FloatField(help_text="summed over `nodes`")
    cost_share = serializers.FloatField(help_text="of the cost of `nodes` over the window")
    projected_monthly_cost = serializers.FloatField(help_text="what unloading it there saves")


class IdleOnNodesRowSerializer(GhostRowSerializer):
    serving_nodes = serializers.ListField(
        child=serializers.CharField(), help_text="nodes where it served clients in the window"
    )


class GhostReportSerializer(serializers.Serializer):
    from_ = serializers.CharField(help_text="ISO 8601")
    to = serializers.CharField(help_text="ISO 8601")
    days = serializers.FloatField()
    currency = serializers.CharField()
    rows = GhostRowSerializer(many=True)
    idle_on_nodes = IdleOnNodesRowSerializer(many=True)

    def get_fields(self):
        fields = super().get_fields()
        fields["from"] = fields.pop("from_")
        return fields


class BudgetRowSerializer(serializers.Serializer):
    team = serializers.CharField()
    monthly_budget = serializers.FloatField()
    month_to_date = serializers.FloatField()
    used_pct = serializers.FloatField(allow_null=True)
    level = serializers.ChoiceField(choices=["ok", "warning", "over"])


class BudgetsSerializer(serializers.Serializer):
    rows = BudgetRowSerializer(many=True)


def _json_or_csv(serializer) -> dict:
    """The same report as JSON or, with format=csv / Accept: text/csv, its rows as CSV."""
    return {(200, "application/json"): serializer, (200, "text/csv"): OpenApiTypes.STR}


class CsvRenderer(BaseRenderer):
    """A report's rows as CSV (the same rows and columns as the JSON answer)."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        rows = data.get("rows") if isinstance(data, dict) else None
        if rows is None:  # an error: its messages, one per line
            rows = data.get("errors", []) if isinstance(data, dict) else []
        out = io.StringIO()
        columns = list(rows[0]) if rows else []
        writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _csv_cell(v) for k, v in row.items()})
        return out.getvalue().encode()


class FocusRenderer(CsvRenderer):
    """The cost report as FinOps FOCUS 1.0 CSV (reports/focus.py): its columns in its order."""

    format = "focus"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        if not isinstance(data, dict) or "columns" not in data:  # an error
            return super().render(data, accepted_media_type, renderer_context)
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=data["columns"], lineterminator="\n")
        writer.writeheader()
        for row in data["rows"]:
            writer.writerow({k: _csv_cell(v) for k, v in row.items()})
        return out.getvalue().encode()


def _csv_cell(value):
    """None as an empty cell; a list (a ghost's nodes) as its items joined by spaces."""
    if value is None:
        return ""
    return " ".join(map(str, value)) if isinstance(value, list) else value


def parse_when(value: str) -> datetime:
    """An ISO 8601 time or date (UTC when no offset is given)."""
    try:
        parsed = parse_datetime(value.strip())
        if parsed is None and (day := parse_date(value.strip())) is not None:
            parsed = datetime(day.year, day.month, day.day)
    except ValueError:  # well formed but not a real date, such as month 13
        parsed = None
    if parsed is None:
        raise serializers.ValidationError("Use an ISO 8601 date or time.")
    return parsed if timezone.is_aware(parsed) else parsed.replace(tzinfo=UTC)


class CostQuerySerializer(inputs.ChoicesListed):
    group_by = serializers.ChoiceField(choices=list(selectors.GROUP_KEYS), default="model")
    kind = serializers.ChoiceField(choices=list(COST_KINDS), required=False)
    share_idle = serializers.BooleanField(default=False)

    def validate_share_idle(self, value: bool) -> bool:
        group_by = self.initial_data.get("group_by", "model")
        if value and group_by in selectors.NODE_GROUPS:
            raise serializers.ValidationError("Idle is already on each row by cluster or node.")
        return value

    def validate(self, attrs):
        params = self.initial_data
        now = timezone.now()
        errors, times = {}, {}
        month_start = services.floor_month(now)
        for name, default in (("from", month_start), ("to", now)):
            try:
                times[name] = parse_when(params[name]) if params.get(name) else default
            except serializers.ValidationError as exc:
                errors[name] = exc.detail
        if errors:
            raise serializers.ValidationError(errors)
        if times["to"] <= times["from"]:
            raise serializers.ValidationError({"to": "Must be after 'from'."})
        if times["to"] - times["from"] > MAX_RANGE:
            raise serializers.ValidationError({"to": "A report spans at most 400 days."})
        return {**attrs, "since": times["from"], "until": times["to"]}


class _FormatChecked(APIView):
    def perform_content_negotiation(self, request, force=False):
        fmt = request.query_params.get("format")
        if not force and fmt is not None and fmt not in {r.format for r in self.get_renderers()}:
            raise ValidationError({"format": f"Unknown format {fmt!r}."})
        return super().perform_content_negotiation(request, force)


class CostReportApi(_FormatChecked):
    """Cost per model, version, team, cluster or node over a range; idle and unknown apart."""

    permission_classes = [ReportsRead]
    renderer_classes = [JSONRenderer, CsvRenderer, FocusRenderer]

    @extend_schema(
        parameters=[
            OpenApiParameter(name, str, required=False)
            for name in ("from", "to", "group_by", "kind", "share_idle")
        ]
        + [
            OpenApiParameter(
                "format",
                str,
                required=False,
                description="json (default); csv: the rows as CSV; focus: FinOps FOCUS 1.0 CSV, "
                "one row per charge period, node, kind and model version (docs/COSTS.md)",
            )
        ],
        responses=_json_or_csv(CostReportSerializer),
    )
    def get(self, request):
        query = CostQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        q = query.validated_data
        if request.accepted_renderer.format == "focus":
            rows = focus_export(
                since=q["since"], until=q["until"], models=visible_models(request.user)
            )
            return Response(rows)
        report = selectors.cost_report(
            since=q["since"],
            until=q["until"],
            group_by=q["group_by"],
            kind=q.get("kind"),
            share_idle=q["share_idle"],
            models=visible_models(request.user),
        )
        return Response(report)


class GhostQuerySerializer(inputs.ChoicesListed):
    days = serializers.FloatField(default=7.0, max_value=90.0)

    def validate_days(self, value: float) -> float:
        if not value > 0:
            raise serializers.ValidationError("Must be more than 0.")
        return value


class GhostReportApi(_FormatChecked):
    """Versions loaded with no traffic for the last N days, and what they cost."""

    permission_classes = [ReportsRead]
    renderer_classes = [JSONRenderer, CsvRenderer]

    @extend_schema(
        parameters=[
            OpenApiParameter("days", float, required=False),
            OpenApiParameter("format", str, required=False),
        ],
        responses=_json_or_csv(GhostReportSerializer),
    )
    def get(self, request):
        query = GhostQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        days = query.validated_data["days"]
        return Response(selectors.ghosts_visible(user=request.user, days=days))


class BudgetsApi(APIView):
    """Teams' monthly budgets with month-to-date cost and how much of it is used."""

    permission_classes = [ReportsRead]

    @extend_schema(responses={200: BudgetsSerializer})
    def get(self, request):
        return Response({"rows": selectors.budgets_visible(user=request.user)})


class BudgetSerializer(inputs.InputSerializer):
    monthly_budget = serializers.DecimalField(
        max_digits=12, decimal_places=2, min_value=0, allow_null=True
    )


class BudgetSetAnswerSerializer(serializers.Serializer):
    team = serializers.CharField()
    monthly_budget = serializers.FloatField(allow_null=True)


class BudgetSetApi(APIView):
    """PUT {"monthly_budget": "1000.00"} (or null to remove): managers set team budgets."""

    permission_classes = [ReportsRead]

    @extend_schema(request=BudgetSerializer, responses={200: BudgetSetAnswerSerializer})
    def put(self, request, team: str):
        if not user_has_role(request.user, Role.MANAGERS.value):
            return errors_response("Budgets are set by managers.", status=403)
        found = Team.objects.filter(name=team).first()
        if found is None:
            return errors_response(f"No team named '{team}'.", field="team", status=404)
        body = BudgetSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        amount = body.validated_data["monthly_budget"]
        services.team_budget_set(team=found, monthly_budget=amount, actor=request.user)
        return Response({"team": found.name, "monthly_budget": amount})
