"""docs/API.md from the OpenAPI document: every operation, its fields, answers and examples.

Pure: `render(document)` takes the schema as a dict (what `/api/schema/?format=json`
answers) and returns Markdown. `python manage.py api_reference > docs/API.md` writes it;
tests/schema/test_api_reference.py fails when the committed page differs.
"""

from __future__ import annotations

import json

HTTP_METHODS = ("get", "post", "put", "patch", "delete")
# Sections of the page, by the first segment after /api/v1/ (benchmark paths under a
# model's version go with the benchmarks).
SECTIONS = {
    "auth": "Auth",
    "teams": "Registry",
    "models": "Registry",
    "clusters": "Clusters and deployments",
    "deployments": "Clusters and deployments",
    "releases": "Releases",
    "benchmarks": "Benchmarks and metrics",
    "metrics": "Benchmarks and metrics",
    "reports": "Reports",
}
SECTION_ORDER = [*dict.fromkeys(SECTIONS.values()), "Other"]
# Example values by field or parameter name, so examples read like a real request.
NAMED_EXAMPLES = {
    "name": "risk_score",
    "model": "risk_score",
    "team": "fraud",
    "cluster": "prod-eu",
    "node": "triton-1",
    "username": "rita",
    "password": "********",
    "alias": "production",
    "version": 3,
    "candidate_version": 4,
    "baseline_version": 3,
    "label": "v2026.12.01",
    "http_url": "http://10.0.0.11:8000",
    "grpc_url": "10.0.0.11:8001",
    "metrics_url": "http://10.0.0.11:8002/metrics",
    "url": "http://10.0.0.5:8080",
    "since": "2026-12-01T00:00:00Z",
    "from": "2026-11-01T00:00:00Z",
    "to": "2026-12-01T00:00:00Z",
    "steps": [5, 25, 50, 100],
    "manual_gates": [50],
    "concurrency": [1, 4, 16],
    "duration_s": 10,
    "analysis": {"min_requests": 50, "max_failed_checks": 2, "latency_tolerance": 1.3},
    "sla": {"p99_latency_ms": 50, "min_success_rate": 0.99},
    "strategy": "canary",
    "action": "pause",
    "environment": "production",
    "sticky_header": "x-user-id",
    "reason": "p99 above the SLA on node triton-2",
    "source_commit": "9f1c2e7",
    "archive": "@risk_score-v4.tar.gz",
    "file": "@perf_analyzer.csv",
    "monthly_budget": "1000.00",
}
FORMAT_EXAMPLES = {
    "date-time": "2026-12-01T08:00:00Z",
    "date": "2026-12-01",
    "uri": "https://ci.example.com/runs/42",
    "uuid": "3f0c9a52-8d51-4c7e-9a1e-1f7b2a6c9d10",
    "binary": "<file>",
    "decimal": "0.50",
}
TYPE_EXAMPLES = {"string": "string", "integer": 1, "number": 1.5, "boolean": True}
# A `name` (in the path or the body) is a cluster's, a node's, a team's... by its collection.
COLLECTION_NAMES = {
    "clusters": "prod-eu",
    "nodes": "triton-1",
    "teams": "fraud",
    "models": "risk_score",
    "token": "ci-pipeline",
}


def _ref_name(schema: dict) -> str | None:
    ref = schema.get("$ref")
    return ref.rsplit("/", 1)[-1] if ref else None


def resolve(document: dict, schema: dict) -> dict:
    """The schema itself, or the component a `$ref` names (one `allOf` wrapper unwrapped)."""
    if "allOf" in schema and len(schema["allOf"]) == 1:
        return {**resolve(document, schema["allOf"][0]), **_without(schema, "allOf")}
    name = _ref_name(schema)
    return document["components"]["schemas"][name] if name else schema


def _without(schema: dict, key: str) -> dict:
    return {k: v for k, v in schema.items() if k != key}


def example(document: dict, schema: dict, name: str = "", depth: int = 0):
    """An example value of a schema: its own example or default, a named or typed one."""
    schema = resolve(document, schema)
    if "example" in schema:
        return schema["example"]
    if name in NAMED_EXAMPLES and depth > 0:
        return NAMED_EXAMPLES[name]
    if "default" in schema:
        return schema["default"]
    if schema.get("enum"):
        return next((v for v in schema["enum"] if v not in ("", None)), schema["enum"][0])
    if "oneOf" in schema or "anyOf" in schema:
        return example(document, (schema.get("oneOf") or schema["anyOf"])[0], name, depth)
    kind = schema.get("type", "object" if "properties" in schema else "string")
    if kind == "array":
        return [] if depth > 4 else [example(document, schema.get("items", {}), "", depth + 1)]
    if kind == "object":
        return _object_example(document, schema, depth)
    return FORMAT_EXAMPLES.get(schema.get("format", ""), TYPE_EXAMPLES.get(kind, "string"))


def _object_example(document: dict, schema: dict, depth: int) -> dict:
    if depth > 4:
        return {}
    properties = schema.get("properties", {})
    if not properties and isinstance(schema.get("additionalProperties"), dict):
        return {"key": example(document, schema["additionalProperties"], "", depth + 1)}
    return {field: example(document, spec, field, depth + 1) for field, spec in properties.items()}


def type_name(document: dict, schema: dict) -> str:
    """`string (date-time)`, `array of Release`, `one of: a, b`, `Release` (a component)."""
    name = _ref_name(schema)
    if name:
        return name
    if "allOf" in schema and len(schema["allOf"]) == 1:
        return type_name(document, schema["allOf"][0])
    if schema.get("enum"):
        return "one of: " + ", ".join(f"`{v}`" for v in schema["enum"] if v not in ("", None))
    if "oneOf" in schema or "anyOf" in schema:
        options = schema.get("oneOf") or schema["anyOf"]
        return " or ".join(type_name(document, option) for option in options)
    kind = schema.get("type", "object")
    if kind == "array":
        return "array of " + type_name(document, schema.get("items", {}))
    return f"{kind} ({schema['format']})" if "format" in schema else kind


def constraints(schema: dict) -> str:
    """Limits a field states: nullable, read-only, lengths, ranges, default."""
    words = []
    if schema.get("nullable"):
        words.append("nullable")
    if schema.get("readOnly"):
        words.append("read-only")
    labels = {
        "minLength": "min length",
        "maxLength": "max length",
        "minimum": "min",
        "maximum": "max",
        "minItems": "min items",
        "maxItems": "max items",
        "pattern": "pattern",
    }
    words += [f"{label} `{schema[key]}`" for key, label in labels.items() if key in schema]
    if "default" in schema:
        words.append(f"default `{json.dumps(schema['default'])}`")
    return ", ".join(words)


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def fields_table(document: dict, schema: dict) -> list[str]:
    """A table of an object schema's fields: name, type, required, limits and meaning."""
    schema = resolve(document, schema)
    properties = schema.get("properties", {})
    if not properties:
        return []
    required = set(schema.get("required", []))
    rows = ["| field | type | required | notes |", "|---|---|---|---|"]
    for field, spec in properties.items():
        target = resolve(document, spec) if "allOf" in spec else spec
        notes = "; ".join(
            part for part in (constraints(target), spec.get("description", "")) if part
        )
        required_word = "yes" if field in required else ""
        rows.append(
            f"| `{field}` | {_cell(type_name(document, spec))} | {required_word} | {_cell(notes)} |"
        )
    return rows


def parameters_table(operation: dict) -> list[str]:
    parameters = operation.get("parameters", [])
    if not parameters:
        return []
    rows = ["| parameter | in | type | required | notes |", "|---|---|---|---|---|"]
    for parameter in parameters:
        schema = parameter.get("schema", {})
        kind = type_name({}, schema) if "$ref" not in schema else _ref_name(schema)
        notes = "; ".join(p for p in (constraints(schema), parameter.get("description", "")) if p)
        required = "yes" if parameter.get("required") else ""
        rows.append(
            f"| `{parameter['name']}` | {parameter['in']} | {_cell(kind)} | {required} "
            f"| {_cell(notes)} |"
        )
    return rows


def example_path(path: str, operation: dict) -> str:
    """The path with example values in place of its `{parameters}`."""
    for parameter in operation.get("parameters", []):
        if parameter["in"] != "path":
            continue
        name = parameter["name"]
        value = NAMED_EXAMPLES.get(name)
        if name == "name":
            value = _collection_name(path.split("{name}")[0])
        if value is None:
            value = 42 if parameter.get("schema", {}).get("type") == "integer" else name
        path = path.replace("{" + name + "}", str(value))
    return path


def curl_example(document: dict, method: str, path: str, operation: dict) -> list[str]:
    """A curl command that calls the operation with a token and an example body."""
    url = "$SWITCHYARD_URL" + example_path(path, operation)
    auth = "" if path.endswith("/auth/token/") else ' -H "Authorization: Token $TOKEN"'
    lines = [f"curl -X {method.upper()}{auth} \\", f'  "{url}"']
    content = operation.get("requestBody", {}).get("content", {})
    if "application/json" in content:
        body = example(document, content["application/json"]["schema"])
        body = {k: v for k, v in body.items() if not _read_only(document, content, k)}
        if "name" in body:
            body["name"] = _collection_name(path)
        lines[-1] += " \\"
        lines += ['  -H "Content-Type: application/json" \\', f"  -d '{json.dumps(body)}'"]
    elif "multipart/form-data" in content:
        schema = resolve(document, content["multipart/form-data"]["schema"])
        for field, spec in schema.get("properties", {}).items():
            value = example(document, spec, field, 1)
            lines[-1] += " \\"
            lines.append(f"  -F '{field}={value}'")
    return ["```sh", *lines, "```"]


def _collection_name(path: str) -> str:
    """The example name of what the path's last literal segment collects."""
    literal = [part for part in path.split("/") if part and not part.startswith("{")]
    return COLLECTION_NAMES.get(literal[-1], "risk_score") if literal else "risk_score"


def _read_only(document: dict, content: dict, field: str) -> bool:
    schema = resolve(document, content["application/json"]["schema"])
    return bool(schema.get("properties", {}).get(field, {}).get("readOnly"))


def responses_table(document: dict, operation: dict) -> list[str]:
    rows = ["| status | body | meaning |", "|---|---|---|"]
    for code, answer in sorted(operation.get("responses", {}).items()):
        content = answer.get("content", {})
        media = next(iter(content), None)
        body = type_name(document, content[media]["schema"]) if media else "empty"
        if media and media != "application/json":
            body += f" ({media})"
        rows.append(f"| {code} | {_cell(body)} | {_cell(answer.get('description', ''))} |")
    return rows


def success_example(document: dict, operation: dict) -> list[str]:
    """The main 2xx answer's JSON example (201, 202, then 200), when it has a JSON body."""
    answers = operation.get("responses", {})
    for code in ("201", "202", "200"):
        schema = answers.get(code, {}).get("content", {}).get("application/json", {}).get("schema")
        if schema:
            text = json.dumps(example(document, schema), indent=2)
            return [f"Example answer ({code}):", "", "```json", text, "```"]
    return []


def section_of(path: str) -> str:
    parts = path.removeprefix("/api/v1/").split("/")
    if "benchmarks" in parts:
        return "Benchmarks and metrics"
    return SECTIONS.get(parts[0], "Other") if path.startswith("/api/v1/") else "Other"


def anchor(method: str, path: str) -> str:
    """GitHub's heading anchor of `### METHOD path`."""
    text = f"{method} {path}".lower()
    return "".join(c for c in text if c.isalnum() or c in " -_").replace(" ", "-")


def operations(document: dict) -> list[tuple[str, str, str, dict]]:
    """(section, method, path, operation) in page order, the schema's own endpoint aside."""
    found = [
        (section_of(path), method, path, spec[method])
        for path, spec in document["paths"].items()
        for method in HTTP_METHODS
        if method in spec and path != "/api/schema/"
    ]
    return sorted(found, key=lambda o: (SECTION_ORDER.index(o[0]), o[2], HTTP_METHODS.index(o[1])))


def operation_block(document: dict, method: str, path: str, operation: dict) -> list[str]:
    lines = [f"### {method.upper()} {path}", "", operation.get("description", "").strip(), ""]
    if parameters := parameters_table(operation):
        lines += [*parameters, ""]
    content = operation.get("requestBody", {}).get("content", {})
    if content:
        media = "application/json" if "application/json" in content else next(iter(content))
        schema = content[media]["schema"]
        lines += [f"Request body (`{media}`, {type_name(document, schema)}):", ""]
        lines += [*fields_table(document, schema), ""]
    lines += ["Example request:", "", *curl_example(document, method, path, operation), ""]
    lines += [*responses_table(document, operation), ""]
    if answer := success_example(document, operation):
        lines += [*answer, ""]
    return lines


def header(document: dict) -> list[str]:
    info = document["info"]
    return [
        "# The REST API (v1)",
        "",
        "<!-- Generated from the OpenAPI document by `python manage.py api_reference >"
        " docs/API.md` (`make api-docs`). Do not edit by hand: change the code, the notes in"
        " controlplane/api_notes.py or controlplane/api_description.md, then regenerate. -->",
        "",
        f"{info['title']} {info['version']}. Interactive reference: `/api/docs/` (Swagger UI)"
        "; the document itself: `/api/schema/`. What changed between versions:"
        " [CHANGELOG.md](../CHANGELOG.md).",
        "",
        info.get("description", "").strip(),
        "",
    ]


def index(found: list[tuple[str, str, str, dict]]) -> list[str]:
    lines = ["## Operations", ""]
    for section in SECTION_ORDER:
        rows = [o for o in found if o[0] == section]
        if not rows:
            continue
        lines += [f"**{section}**", "", "| operation | what |", "|---|---|"]
        for _, method, path, operation in rows:
            what = operation.get("description", "").strip().split(". ")[0].rstrip(".")
            link = f"[`{method.upper()} {path}`](#{anchor(method, path)})"
            lines.append(f"| {link} | {_cell(what)} |")
        lines.append("")
    return lines


def render(document: dict) -> str:
    """The whole page: header, the project's description, an index, then every operation."""
    found = operations(document)
    lines = [*header(document), *index(found)]
    section = None
    for current, method, path, operation in found:
        if current != section:
            lines += [f"## {current}", ""]
            section = current
        lines += operation_block(document, method, path, operation)
    lines += _components(document)
    return "\n".join(lines).rstrip() + "\n"


def _components(document: dict) -> list[str]:
    """Every named schema the operations refer to, with its fields."""
    lines, said = ["## Schemas", ""], set()
    for name, schema in sorted(document["components"]["schemas"].items()):
        table = fields_table(document, schema)
        if not table:
            continue
        lines += [f"### {name}", ""]
        description = schema.get("description", "").strip()
        if description and description not in said:  # shared docstrings: said once
            lines += [description, ""]
            said.add(description)
        lines += [*table, ""]
    return lines
