"""The OpenAPI document as the API behaves: unique component names, documented errors.

* A serializer nested in a view (`TokenCreateApi.InputSerializer`) is named after its view
  (`TokenCreateInput`), so the many `InputSerializer` classes no longer collapse onto one
  component `Input`.
* Every operation documents the error answers API.md promises, in their one shape
  `{"errors": [{"field"?, "message", ...}]}`: 400 where a body or query is read, 401/403
  where a user is needed, 404 where the path names an object, 409 for writes that may
  conflict with the state, 413/415 where a body is sent, 429 where the view is throttled.
"""

from django.http import HttpResponsePermanentRedirect, JsonResponse
from django.urls import Resolver404, resolve
from django.views import defaults
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.openapi import AutoSchema
from rest_framework.permissions import AllowAny

from accounts.errors import ErrorsSerializer
from accounts.inputs import InputSerializer

WRITE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}
BODY_METHODS = {"POST", "PUT", "PATCH"}
ERROR_DESCRIPTIONS = {
    "400": "The request is malformed or a field is invalid.",
    "401": "No valid credentials were given.",
    "403": "The signed-in user may not do this.",
    "404": "No such object (named in the path, or in the body's field).",
    "409": "The request conflicts with the object's current state.",
    "413": "The request body is larger than the limit.",
    "415": "The request body's media type is not accepted.",
    "429": "Too many requests: try again later.",
}


class SwitchyardAutoSchema(AutoSchema):
    def map_parsers(self) -> list:
        """One request content type per operation: JSON where the view takes it (form and
        multipart are accepted too, but a generated client needs one unambiguous body),
        multipart for uploads."""
        media = super().map_parsers()
        return ["application/json"] if "application/json" in media else media

    def get_serializer_name(self, serializer, direction) -> str:
        qualname = serializer.__class__.__qualname__
        if "." not in qualname:
            return super().get_serializer_name(serializer, direction)
        outer, _, inner = qualname.rpartition(".")
        return outer.split(".")[-1].removesuffix("Api") + inner

    def _map_serializer(self, serializer, direction, bypass_extensions=False):
        schema = super()._map_serializer(serializer, direction, bypass_extensions)
        if direction == "request" and isinstance(serializer, InputSerializer):
            schema["additionalProperties"] = False  # unknown fields are refused (400)
        return schema

    def get_operation(self, path, path_regex, path_prefix, method, registry):
        operation = super().get_operation(path, path_regex, path_prefix, method, registry)
        if operation is None:
            return None
        component = self.resolve_serializer(ErrorsSerializer, "response")
        content = {"application/json": {"schema": component.ref}}
        responses = operation.setdefault("responses", {})
        for code in self._error_codes(operation):
            answer = {"description": ERROR_DESCRIPTIONS[code], "content": content}
            responses.setdefault(code, answer)
        return operation

    def _error_codes(self, operation: dict) -> list[str]:
        codes = []
        has_query = any(p.get("in") == "query" for p in operation.get("parameters", []))
        if self.method in BODY_METHODS or has_query:
            codes.append("400")
        if not all(isinstance(p, AllowAny) for p in self.view.get_permissions()):
            codes += ["401", "403"]
        if "{" in self.path or self.method in BODY_METHODS:  # a path's or a body's object
            codes.append("404")
        if self.method in WRITE_METHODS:
            codes.append("409")
        if self.method in BODY_METHODS:
            codes.append("415")
        if "multipart/form-data" in operation.get("requestBody", {}).get("content", {}):
            codes.append("413")
        if self.view.get_throttles():
            codes.append("429")
        return codes


@csrf_exempt
def api_not_found(request, rest: str = ""):
    """The API's own catch-all: an unknown path under /api/ is a JSON 404 whatever the
    settings (with DEBUG on, Django's handler404 is not used and would answer an HTML page).

    A known path missing its final slash is redirected for GET and HEAD, as Django's
    APPEND_SLASH would have done; other methods are told the path to use.
    """
    path = request.path
    if not path.endswith("/"):
        try:
            match = resolve(path + "/")
        except Resolver404:
            match = None
        if match is not None and match.func is not api_not_found:
            if request.method in ("GET", "HEAD"):
                query = request.META.get("QUERY_STRING", "")
                return HttpResponsePermanentRedirect(path + "/" + (f"?{query}" if query else ""))
            message = f"Not found. The path ends with a slash: {path}/"
            return JsonResponse({"errors": [{"message": message}]}, status=404)
    return JsonResponse({"errors": [{"message": "Not found."}]}, status=404)


def handler404(request, exception):
    """API paths answer a 404 in the API's error shape; pages keep Django's page."""
    if request.path.startswith("/api/"):
        return JsonResponse({"errors": [{"message": "Not found."}]}, status=404)
    return defaults.page_not_found(request, exception)
