"""Every list endpoint answers one page: `?limit=` (default 100, at most 1000) and
`?offset=`; the body stays a JSON array (the contract), the total is in `X-Total-Count` and
the next page in `Link: <...>; rel="next"`. No request reads a table whole."""

from collections.abc import Sequence
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param

from accounts.inputs import ChoicesListed
from core.represent import rows

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000

PAGE_PARAMETERS = [
    OpenApiParameter(
        "limit", OpenApiTypes.INT, description=f"page size, 1..{MAX_LIMIT} (default 100)"
    ),
    OpenApiParameter("offset", OpenApiTypes.INT, description="items to skip (default 0)"),
    OpenApiParameter(
        "X-Total-Count",
        OpenApiTypes.INT,
        location=OpenApiParameter.HEADER,
        response=[200],
        description="items in the whole list",
    ),
    OpenApiParameter(
        "Link",
        OpenApiTypes.STR,
        location=OpenApiParameter.HEADER,
        response=[200],
        description='<url of the next page>; rel="next", while there is one',
    ),
]


class PageSerializer(serializers.Serializer):
    limit = serializers.IntegerField(min_value=1, max_value=MAX_LIMIT, default=DEFAULT_LIMIT)
    offset = serializers.IntegerField(min_value=0, max_value=2**31 - 1, default=0)


def page_of(request, items: Any) -> tuple[list, dict[str, str]]:
    """(the requested page of `items` (a QuerySet or list), its headers); a bad limit or
    offset raises a ValidationError (400 naming it)."""
    params = PageSerializer(data=request.query_params)
    params.is_valid(raise_exception=True)
    limit, offset = params.validated_data["limit"], params.validated_data["offset"]
    total = len(items) if isinstance(items, Sequence) else items.count()
    page = list(items[offset : offset + limit])
    headers = {"X-Total-Count": str(total)}
    if offset + len(page) < total:
        url = request.build_absolute_uri()
        url = replace_query_param(
            replace_query_param(url, "limit", limit), "offset", offset + limit
        )
        headers["Link"] = f'<{url}>; rel="next"'
    return page, headers


def paginated(request, items: Any, serializer_class, **kwargs) -> Response:
    """A Response of one page of `items` as `serializer_class(many=True)` writes it (built by
    core/represent.py)."""
    page, headers = page_of(request, items)
    return Response(rows(serializer_class, page, **kwargs), headers=headers)


class ListFilters(ChoicesListed):
    """`?model=&cluster=&state=&since=` on the lists of async resources (API.md, Lists).

    Subclasses set `state`'s choices; the state is matched case-insensitively.
    """

    model = serializers.CharField(required=False, help_text="a model's name")
    cluster = serializers.CharField(required=False, help_text="a cluster's name")
    state = serializers.ChoiceField(choices=[], required=False)
    since = serializers.DateTimeField(
        required=False, help_text="created at or after this ISO 8601 time"
    )

    def to_internal_value(self, data):
        if "state" in data:
            data = {key: data[key] for key in data} | {"state": str(data["state"]).lower()}
        return super().to_internal_value(data)


def list_filters(request, serializer_class: type[ListFilters]) -> dict[str, Any]:
    """The validated filters of a list request (400 naming a bad one), absent ones left out."""
    filters = serializer_class(data=request.query_params)
    filters.is_valid(raise_exception=True)
    return dict(filters.validated_data)


def filtered(
    qs,
    *,
    model=None,
    cluster=None,
    state=None,
    since=None,
    state_field="status",
    model_field="model",
):
    """`qs` narrowed by model and cluster names, state and creation time, newest first."""
    if model:
        qs = qs.filter(**{f"{model_field}__name": model})
    if cluster:
        qs = qs.filter(cluster__name=cluster)
    if state:
        qs = qs.filter(**{f"{state_field}__iexact": state})
    if since is not None:
        qs = qs.filter(created_at__gte=since)
    return qs.order_by("-created_at", "-id")
