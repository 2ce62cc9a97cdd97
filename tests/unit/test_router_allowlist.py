"""The router's allowlist as rendered: which (method, path) pass, the refusals, their count.

The patterns are checked here with Python's `re` (the same syntax as nginx's PCRE for these
patterns); tests/integration/test_router_gate.py sends the same requests to a real nginx.
"""

import json
import re

import pytest

from integrations.routers import ModelRoute, RouterState, allowlist
from integrations.routers.access_log import (
    LOG_FIELDS,
    parse_line,
    refused_requests,
    router_counts,
)
from integrations.routers.nginx import render_config

UPSTREAMS = ["http://127.0.0.1:8000"]
GRPC = ["127.0.0.1:8001"]


def render(upstreams=UPSTREAMS, grpc=GRPC) -> str:
    state = RouterState(upstreams, [ModelRoute("risk", {1: 100.0})], grpc_upstreams=grpc)
    return render_config(
        state, listen="127.0.0.1:18080", prefix_dir="/srv/r", grpc_listen="127.0.0.1:18081"
    )


def passes(method: str, path: str) -> bool:
    """Whether the HTTP allowlist lets (method, normalised path) through."""
    return any(m == method and re.search(p, path) for m, p in allowlist.HTTP_ALLOWED)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v2/models/risk/infer"),
        ("POST", "/v2/models/risk/versions/2/infer"),
        ("POST", "/v2/models/ticket.router-v_2/generate"),
        ("POST", "/v2/models/t/versions/1/generate_stream"),
        ("GET", "/v2"),
        ("GET", "/v2/health/live"),
        ("GET", "/v2/health/ready"),
        ("GET", "/v2/models/risk"),
        ("GET", "/v2/models/risk/versions/3"),
        ("GET", "/v2/models/risk/ready"),
        ("GET", "/v2/models/risk/versions/3/ready"),
    ],
)
def test_inference_readiness_and_metadata_pass(method, path):
    assert passes(method, path)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v2/repository/index"),
        ("POST", "/v2/repository/models/risk/load"),
        ("POST", "/v2/repository/models/risk/unload"),
        ("GET", "/v2/systemsharedmemory/status"),
        ("POST", "/v2/cudasharedmemory/region/r/register"),
        ("GET", "/v2/trace/setting"),
        ("POST", "/v2/models/risk/trace/setting"),
        ("POST", "/v2/logging"),
        ("GET", "/v2/models/stats"),
        ("GET", "/v2/models/stats/ready"),
        ("GET", "/v2/models/risk/stats"),
        ("GET", "/v2/models/risk/versions/1/stats"),
        ("GET", "/v2/models/risk/config"),
        ("GET", "/v2/models/risk/infer"),  # wrong method
        ("POST", "/v2/models/risk/ready"),
        ("HEAD", "/v2"),
        ("DELETE", "/v2/models/risk"),
        ("POST", "/v2/models/../infer"),
        ("POST", "/v2/models/./infer"),
        ("POST", "/v2/models/a b/infer"),
        ("POST", "/v2/models/risk/versions/x/infer"),
        ("POST", "/v2/models/risk/infer/"),
        ("GET", "/v2/"),
        ("GET", "/metrics"),
        ("GET", "/"),
    ],
)
def test_everything_else_is_refused(method, path):
    assert not passes(method, path)


def test_each_allowed_location_checks_its_method_then_the_plain_path_then_proxies():
    config = render()
    for method, pattern in allowlist.HTTP_ALLOWED:
        body = config.split(f'location ~ "{pattern}" {{', 1)[1]
        lines = [line.strip() for line in body.splitlines()[1:]]
        assert lines[0] == f"if ($request_method != {method}) {{"
        assert lines[4] == "if ($request_uri != $uri$is_args$args) {"
        assert lines[8] == "proxy_pass http://triton;"


def test_a_routed_location_refuses_other_methods_before_it_names_its_model():
    body = render().split("location = /v2/models/risk/infer {", 1)[1]
    lines = [line.strip() for line in body.splitlines()[1:]]
    assert lines[0] == "if ($request_method != POST) {"
    assert lines[1] == "set $sy_refused 1;"
    assert lines[4] == 'set $sy_model "risk";'


def test_grpc_passes_only_the_inference_methods_and_refuses_with_permission_denied():
    grpc_server = render().split("listen 127.0.0.1:18081 http2;", 1)[1]
    allowed, refusing = grpc_server.split("location / {", 1)
    methods = "|".join(allowlist.GRPC_ALLOWED)
    assert f'location ~ "^/inference\\.GRPCInferenceService/(?:{methods})$" {{' in allowed
    assert "grpc_pass grpc://triton_grpc;" in allowed
    assert "grpc_pass" not in refusing
    assert "add_header grpc-status 7 always;" in refusing
    assert "return 200;" in refusing and "set $sy_refused 1;" in refusing
    assert "default_type application/grpc;" in grpc_server
    for refused in ("RepositoryModelLoad", "RepositoryModelUnload", "RepositoryIndex"):
        assert refused not in allowlist.GRPC_ALLOWED


def test_a_refusal_echoes_only_a_path_of_harmless_characters():
    shown = re.search(r'"~(.*)" \$uri;', allowlist.refusal_map()).group(1)
    assert re.search(shown, "/v2/repository/models/risk.v-1_x/unload")
    for hostile in ('/v2/x"y', "/v2/<script>", "/v2/a\\b", "/v2/%41", "/" + "a" * 300):
        assert not re.search(shown, hostile)


def test_nginx_answers_json_and_serves_no_file_type():
    http_server = render().split("listen 127.0.0.1:18080;", 1)[1].split("http2;", 1)[0]
    assert "default_type application/json;" in http_server
    assert "types {}" in render()


def log_line(ts: float, uri: str, status: int, refused: bool, method: str = "POST") -> str:
    raw = {name: "" for name in LOG_FIELDS}
    raw |= {"ts": f"{ts:.3f}", "method": method, "request_uri": uri, "uri": uri}
    raw |= {"status": str(status), "refused": "1" if refused else ""}
    return json.dumps(raw, separators=(",", ":"))


def test_refusals_are_logged_counted_and_left_out_of_the_inference_counts():
    assert LOG_FIELDS["refused"] == "$sy_refused"
    lines = [
        log_line(10.0, "/v2/repository/index", 403, True),
        log_line(20.0, "/v2/models/risk/infer", 403, True, method="GET"),
        log_line(30.0, "/inference.GRPCInferenceService/RepositoryModelLoad", 200, True),
        log_line(31.0, "/v2/models/risk/infer", 200, False),
        log_line(32.0, "/v2/models/risk/infer", 404, False),  # Triton's own answer
    ]
    assert parse_line(lines[0]).refused and not parse_line(lines[3]).refused
    assert refused_requests(lines, since=0.0) == 3
    assert refused_requests(lines, since=15.0) == 2
    assert refused_requests(lines, since=31.0) == 0
    counts = router_counts(lines)
    assert counts.split == {"risk": 2} and counts.grpc == 0
