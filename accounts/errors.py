"""API errors in the one shape API.md promises: {"errors": [{"field"?, "message"}]}."""

from typing import Any

from rest_framework import serializers
from rest_framework.views import exception_handler


def _flatten(detail: Any, field: str | None = None) -> list[dict[str, Any]]:
    if isinstance(detail, dict):
        out: list[dict[str, Any]] = []
        for key, value in detail.items():
            name = None if key in ("non_field_errors", "detail") else key
            sub = f"{field}.{name}" if field and name else (name or field)
            out.extend(_flatten(value, sub))
        return out
    if isinstance(detail, list):
        return [item for value in detail for item in _flatten(value, field)]
    entry: dict[str, Any] = {"message": str(detail)}
    if field:
        entry["field"] = field
    return [entry]


def api_exception_handler(exc, context):
    """DRF's handler, then reshaped so every 4xx body is {"errors": [...]}."""
    response = exception_handler(exc, context)
    if response is not None and not (isinstance(response.data, dict) and "errors" in response.data):
        response.data = {"errors": _flatten(response.data)}
    return response


def errors_response(message: str, *, field: str | None = None, status: int = 400):
    """A one-error API answer in the contract's shape (API.md)."""
    from rest_framework.response import Response

    error = {**({"field": field} if field else {}), "message": message}
    return Response({"errors": [error]}, status=status)


class ErrorSerializer(serializers.Serializer):
    field = serializers.CharField(required=False, help_text="The input field at fault.")
    message = serializers.CharField()
    file = serializers.CharField(required=False, help_text="The uploaded file at fault.")
    line = serializers.IntegerField(required=False, help_text="The line of that file.")


class ErrorsSerializer(serializers.Serializer):
    """The contract's error body (API.md): {"errors": [{"field"?, "message", ...}]}."""

    errors = ErrorSerializer(many=True)
