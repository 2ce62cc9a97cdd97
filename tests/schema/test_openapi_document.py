"""The OpenAPI document says what the API answers: bodies, nulls, errors, names."""

import pytest
from django.core.management import call_command
from django.urls import path as url_path
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.throttling import SimpleRateThrottle
from rest_framework.views import APIView


@pytest.fixture(scope="module")
def document() -> dict:
    return SchemaGenerator().get_schema(request=None, public=True)


def _response_schema(document: dict, path: str, method: str, code: str) -> dict:
    answer = document["paths"][path][method]["responses"][code]
    schema = answer["content"]["application/json"]["schema"]
    return _resolve(document, schema)


def _resolve(document: dict, schema: dict) -> dict:
    if "$ref" in schema:
        return document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def test_the_document_builds_without_a_warning_and_validates(tmp_path):
    """Fails on colliding component names (`Input`) and views without a documented body."""
    call_command("spectacular", "--fail-on-warn", "--validate", "--file", str(tmp_path / "s"))


def test_nested_serializers_get_one_component_each(document):
    names = set(document["components"]["schemas"])

    assert {"TokenCreateInput", "ModelListCreateInput", "ReleaseListCreateInput"} <= names
    assert "Input" not in names and "Output" not in names


@pytest.mark.parametrize(
    "component, field",
    [
        ("Release", "router_weight"),
        ("Release", "finished_at"),
        ("Release", "created_by"),
        ("Deployment", "version"),
        ("Deployment", "started_at"),
        ("DeploymentNode", "load_ms"),
        ("Node", "last_seen_at"),
        ("Benchmark", "cluster"),
        ("Benchmark", "finished_at"),
        ("VersionSummary", "created_by"),
    ],
)
def test_fields_the_api_returns_as_null_are_nullable(document, component, field):
    assert document["components"]["schemas"][component]["properties"][field]["nullable"]


@pytest.mark.parametrize(
    "path, method, code, fields",
    [
        ("/api/v1/releases/", "post", "201", {"id", "state"}),
        ("/api/v1/deployments/", "post", "202", {"id", "status"}),
        ("/api/v1/clusters/{name}/models/{model}/unload/", "post", "202", {"id", "status"}),
        ("/api/v1/benchmarks/", "post", "202", {"id", "status"}),
        ("/api/v1/benchmarks/{run_id}/cancel/", "post", "202", {"id", "status"}),
        ("/api/v1/models/{name}/aliases/{alias}/", "put", "200", {"model", "alias", "version"}),
        ("/api/v1/clusters/{name}/status/", "get", "200", {"cluster", "desired", "nodes"}),
        ("/api/v1/clusters/{name}/router/", "get", "200", {"driver", "running", "routes"}),
    ],
)
def test_answers_are_documented_with_their_real_bodies(document, path, method, code, fields):
    assert set(_response_schema(document, path, method, code)["properties"]) >= fields


def test_every_operation_documents_its_errors_in_the_error_shape(document):
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            responses = operation["responses"]
            if "{" in path:
                assert "404" in responses, (method, path)
            if method in ("post", "put", "patch"):
                assert {"400", "409", "415"} <= set(responses), (method, path)
            if path.startswith("/api/v1/") and path != "/api/v1/auth/token/":
                assert {"401", "403"} <= set(responses), (method, path)
    errors = _response_schema(document, "/api/v1/models/{name}/", "get", "404")
    assert errors["properties"]["errors"]["type"] == "array"


def test_path_parameters_are_typed(document):
    parameters = document["paths"]["/api/v1/releases/{release_id}/"]["get"]["parameters"]
    assert {"name": "release_id", "type": "integer"} in [
        {"name": p["name"], "type": p["schema"]["type"]} for p in parameters
    ]


def test_an_unknown_api_path_answers_a_json_404_and_pages_keep_theirs(client):
    api = client.get("/api/v1/models/x/versions/not-a-number/")
    page = client.get("/no-such-page/")

    assert api.status_code == 404 and api.json() == {"errors": [{"message": "Not found."}]}
    assert page.status_code == 404 and page["Content-Type"].startswith("text/html")


class _FiveAMinute(SimpleRateThrottle):
    rate = "5/min"

    def get_cache_key(self, request, view):
        return "fixed"


class _ThrottledApi(APIView):
    throttle_classes = [_FiveAMinute]

    @extend_schema(request=None, responses={204: None})
    def post(self, request):
        return Response(status=204)


def test_a_throttled_operation_documents_429():
    generator = SchemaGenerator(patterns=[url_path("api/v1/throttled/", _ThrottledApi.as_view())])
    document = generator.get_schema(request=None, public=True)

    assert "429" in document["paths"]["/api/v1/throttled/"]["post"]["responses"]
