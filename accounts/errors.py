"""API errors in the one shape API.md promises: {"errors": [{"field"?, "message"}]}."""

from typing import Any

from rest_framework import serializers
from rest_framework.views import exception_handler


def flatten_errors(detail: Any, field: str | None = None) -> list[dict[str, Any]]:
    if isinstance(detail, dict):
        out: list[dict[str, Any]] = []
        for key, value in detail.items():
            name = None if key in ("non_field_errors", "detail") else key
            sub = f"{field}.{name}" if field and name else (name or field)
            out.extend(flatten_errors(value, sub))
        return out
    if isinstance(detail, list):
        return [item for value in detail for item in flatten_errors(value, field)]
    entry: dict[str, Any] = {"message": str(detail)}
    if field:
        entry["field"] = field
    return [entry]


class ApplicationError(Exception):
    """A request refused for a reason the user can fix: the one error type services raise.

    `status` is the HTTP code (the subclass's default unless given), `field` the input at
    fault, `errors` the API's list of {"field"|"file", "line"?, "message"} entries (one built
    from the message unless given). The API exception handler answers it; views never catch it.
    """

    status = 400

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        status: int | None = None,
        errors: list | None = None,
        file: str | None = None,
        line: int | None = None,
    ):
        super().__init__(message)
        self.message, self.field, self.line = message, field, line
        if status is not None:
            self.status = status
        entry: dict[str, Any] = {"message": message}
        if file is not None:
            entry["file"] = file
        elif field:
            entry["field"] = field
        if line is not None:
            entry["line"] = line
        self.errors = errors or [entry]


class Refused(ApplicationError):
    """400: the input breaks a rule."""


class Forbidden(ApplicationError):
    """403: the user may not do this (not a member of the owning team, not a superuser)."""

    status = 403


class NotFound(ApplicationError):
    """404: a resource named in the path or the body does not exist."""

    status = 404


class Conflict(ApplicationError):
    """409: the request conflicts with an existing resource, which the message names."""

    status = 409


def error_response(exc: ApplicationError):
    """The API answer for `exc`: {"errors": [...]} with its status."""
    from rest_framework.response import Response

    return Response({"errors": exc.errors}, status=exc.status)


def api_exception_handler(exc, context):
    """Every API error answered once, in one shape: {"errors": [...]}.

    ApplicationError (services' refusals) first, then DRF's own (validation, 401, 403, 404).
    """
    if isinstance(exc, ApplicationError):
        return error_response(exc)
    response = exception_handler(exc, context)
    if response is not None and not (isinstance(response.data, dict) and "errors" in response.data):
        response.data = {"errors": flatten_errors(response.data)}
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
