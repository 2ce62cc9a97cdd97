"""Metrics time series from the per-minute rollups (API.md: GET /api/v1/metrics/)."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta

from django.http import HttpResponse
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.views import APIView

from accounts import inputs
from telemetry import resolution, series

_RELATIVE = re.compile(r"^(\d+)([smhd])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def parse_since(value: str, *, now: datetime) -> datetime:
    """An ISO datetime, or a span back from now such as "90m", "1h", "24h", "7d"."""
    match = _RELATIVE.match(value.strip())
    if match:
        return now - timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
    parsed = parse_datetime(value.strip())
    if parsed is None:
        raise serializers.ValidationError("Use an ISO 8601 time or a span like 1h, 24h, 7d.")
    return parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed)


class MetricsQuerySerializer(inputs.ChoicesListed):
    cluster = serializers.CharField(required=False, default="")
    model = serializers.CharField(required=False, default="")
    version = serializers.CharField(required=False, default="")
    node = serializers.CharField(required=False, default="")
    since = serializers.CharField(required=False, default="1h")
    kind = serializers.ChoiceField(choices=["model", "node"], default="model")
    shape = serializers.ChoiceField(choices=["points", "series"], default="points")
    fields = serializers.CharField(required=False, default="")
    max_points = serializers.IntegerField(
        required=False,
        min_value=10,
        max_value=resolution.MAX_POINTS_PER_SERIES,
        default=resolution.MAX_POINTS_PER_SERIES,
    )

    def validate_since(self, value: str) -> datetime:
        return parse_since(value, now=timezone.now())

    def validate(self, attrs):
        if attrs["kind"] == "node" and not attrs["cluster"]:
            raise serializers.ValidationError({"cluster": "Node series need a cluster."})
        known = series.NODE_FIELDS if attrs["kind"] == "node" else series.MODEL_FIELDS
        asked = tuple(f.strip() for f in attrs["fields"].split(",") if f.strip())
        unknown = [f for f in asked if f not in known]
        if unknown:
            raise serializers.ValidationError(
                {
                    "fields": f"Unknown {attrs['kind']} field(s) {', '.join(unknown)}; "
                    f"choose from {', '.join(known)}."
                }
            )
        attrs["fields"] = tuple(dict.fromkeys(asked))
        return attrs


class MetricsApi(APIView):
    """Points per (cluster, model, version), summed over nodes unless `node`, at the
    resolution the range calls for (`step_s`: minutes up to about 33 h, then 5-minute,
    hourly or daily sums; at most about 2,000 points per series)."""

    @extend_schema(
        parameters=[
            OpenApiParameter(name, str, required=False)
            for name in ("cluster", "model", "version", "node", "since", "kind", "shape", "fields")
        ]
        + [OpenApiParameter("max_points", int, required=False)],
        responses={200: dict},
    )
    def get(self, request):
        query = MetricsQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        q = query.validated_data
        step, found = series.answer(**q)
        head = {
            "since": q["since"].isoformat(),
            "kind": q["kind"],
            "step_s": step.seconds,
            "resolution": step.name,
        }
        # PostgreSQL wrote the figures' JSON (telemetry/series.py): passed through as text.
        body = json.dumps(head)[:-1] + f', "{q["shape"]}": {found}}}'
        return HttpResponse(body, content_type="application/json")
