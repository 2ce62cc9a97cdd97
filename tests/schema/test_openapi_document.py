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
        ("/api/v1/releases/", "post", "201", {"id", "state", "finished", "outcome", "steps"}),
        ("/api/v1/deployments/", "post", "202", {"id", "state", "finished", "outcome"}),
        (
            "/api/v1/clusters/{name}/models/{model}/unload/",
            "post",
            "202",
            {"id", "state", "finished", "outcome"},
        ),
        ("/api/v1/benchmarks/", "post", "202", {"id", "state", "finished", "outcome"}),
        ("/api/v1/benchmarks/{run_id}/cancel/", "post", "202", {"id", "state", "finished"}),
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


def _operations(document: dict):
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            yield path, method, operation


def test_every_request_body_is_its_own_component_with_one_content_type(document):
    """A generated client needs one unambiguous body per operation, never one shared by
    accident (the 1.0 schema sent every body to the sign-in `Input`)."""
    seen: dict[str, str] = {}
    for path, method, operation in _operations(document):
        body = operation.get("requestBody")
        if body is None:
            continue
        assert len(body["content"]) == 1, (method, path, list(body["content"]))
        ((media, content),) = body["content"].items()
        uploads = media == "multipart/form-data"
        assert media == "application/json" or uploads, (method, path, media)
        ref = content["schema"]["$ref"]
        assert ref not in seen, f"{method} {path} shares {ref} with {seen[ref]}"
        seen[ref] = f"{method} {path}"


@pytest.mark.parametrize(
    "component, enum, values",
    [
        ("VersionSummary", "VersionStateEnum", ["pending", "succeeded", "failed"]),
        ("Deployment", "DeploymentStateEnum", ["pending", "running", "succeeded", "failed"]),
        (
            "Benchmark",
            "BenchmarkStateEnum",
            ["pending", "running", "succeeded", "failed", "cancelled"],
        ),
        ("Release", "ReleaseStateEnum", None),
    ],
)
def test_async_resources_speak_one_vocabulary(document, component, enum, values):
    schemas = document["components"]["schemas"]
    props = schemas[component]["properties"]
    assert props["state"]["allOf"][0]["$ref"].endswith(f"/{enum}")
    assert props["finished"]["type"] == "boolean"
    assert props["outcome"]["nullable"] is True
    assert props["outcome"]["oneOf"][0]["$ref"].endswith("/OutcomeEnum")
    assert schemas["OutcomeEnum"]["enum"] == ["succeeded", "failed", "rolled_back", "cancelled"]
    states = schemas[enum]["enum"]
    assert states == (values or [s.lower() for s in schemas["ReleasePhaseEnum"]["enum"]])
    assert all(state == state.lower() for state in states)


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/models/{name}/versions/{version}/",
        "/api/v1/deployments/{deployment_id}/",
        "/api/v1/benchmarks/{run_id}/",
        "/api/v1/releases/{release_id}/",
    ],
)
def test_async_details_take_wait(document, path):
    parameters = document["paths"][path]["get"]["parameters"]
    wait = next(p for p in parameters if p["name"] == "wait")
    assert wait["in"] == "query" and wait["schema"]["type"] == "number"
