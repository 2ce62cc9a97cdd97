"""The API reference renderer (controlplane/api_reference.py), pure: a small document in,
Markdown out."""

from controlplane.api_reference import anchor, example, render, type_name

DOCUMENT = {
    "openapi": "3.0.3",
    "info": {"title": "Switchyard API", "version": "9.9.9", "description": "## Conventions"},
    "paths": {
        "/api/v1/clusters/{name}/nodes/": {
            "post": {
                "description": "Add a node.",
                "parameters": [
                    {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
                "requestBody": {
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/N"}}}
                },
                "responses": {
                    "201": {
                        "description": "",
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/N"}}
                        },
                    },
                    "409": {"description": "Exists."},
                },
            }
        },
        "/api/schema/": {"get": {"responses": {}}},
    },
    "components": {
        "schemas": {
            "N": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "maxLength": 64},
                    "http_url": {"type": "string", "format": "uri"},
                    "gpu_count": {"type": "integer", "minimum": 0, "default": 0},
                    "kind": {"allOf": [{"$ref": "#/components/schemas/KindEnum"}]},
                    "seen": {"type": "string", "format": "date-time", "nullable": True},
                },
                "required": ["name", "http_url"],
            },
            "KindEnum": {"enum": ["cpu", "gpu"], "type": "string"},
        }
    },
}


def test_examples_follow_names_enums_formats_and_defaults():
    node = example(DOCUMENT, {"$ref": "#/components/schemas/N"})
    assert node == {
        "name": "risk_score",
        "http_url": "http://10.0.0.11:8000",
        "gpu_count": 0,
        "kind": "cpu",
        "seen": "2026-12-01T08:00:00Z",
    }
    assert example(DOCUMENT, {"type": "array", "items": {"type": "integer"}}) == [1]


def test_type_names_say_components_enums_and_arrays():
    assert type_name(DOCUMENT, {"$ref": "#/components/schemas/N"}) == "N"
    assert type_name(DOCUMENT, {"type": "array", "items": {"$ref": "#/x/N"}}) == "array of N"
    assert type_name(DOCUMENT, {"enum": ["a", "b", ""]}) == "one of: `a`, `b`"
    assert type_name(DOCUMENT, {"type": "string", "format": "uri"}) == "string (uri)"


def test_the_page_has_every_operation_with_fields_example_and_answers():
    page = render(DOCUMENT)
    assert page.startswith("# The REST API (v1)\n")
    assert "Switchyard API 9.9.9" in page and "## Conventions" in page
    assert "[`POST /api/v1/clusters/{name}/nodes/`](#post-apiv1clustersnamenodes)" in page
    assert "### POST /api/v1/clusters/{name}/nodes/" in page
    assert "| `name` | string | yes | max length `64` |" in page
    assert "| `seen` | string (date-time) |  | nullable |" in page
    assert '"$SWITCHYARD_URL/api/v1/clusters/prod-eu/nodes/"' in page  # the cluster's name
    assert '-d \'{"name": "triton-1", "http_url"' in page  # the node's name
    assert "| 409 | empty | Exists. |" in page
    assert "Example answer (201):" in page
    assert "/api/schema/" not in page.split("## Operations")[1]  # the document's own endpoint


def test_anchors_are_githubs():
    assert anchor("get", "/api/v1/releases/{release_id}/") == "get-apiv1releasesrelease_id"
