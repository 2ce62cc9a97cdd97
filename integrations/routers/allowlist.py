"""What the router lets through: inference, readiness and metadata only (the nginx lines).

Triton's other APIs (repository index, load with config and files, unload, shared memory,
trace, logging, statistics, model config) change or expose a node: a client that may infer
must not reach them through the router. nginx answers everything off this list itself, with
403 and a JSON body over HTTP, and with gRPC status PERMISSION_DENIED over gRPC; each refusal
is logged with `"refused":"1"` (access_log.py counts them).

nginx matches locations against the normalised path (`%XX` decoded, `.` and `..` resolved,
slashes merged) but passes the path on as the client sent it. A request whose raw path is not
already in plain form is therefore refused by every allowed location: what Triton gets is
exactly what was checked. Plain Python, no Django.
"""

from __future__ import annotations

# A model name as Triton takes it in a URL, but never only dots (a path segment nginx would
# resolve) nor `stats` (`GET /v2/models/stats` is Triton's statistics of every model).
NAME = r"(?!(?:\.+|stats)(?:/|$))[A-Za-z0-9_.-]+"
VERSION = r"(?:/versions/[0-9]+)?"

# (method, anchored regex of the normalised path) that pass to the nodes over HTTP.
HTTP_ALLOWED: tuple[tuple[str, str], ...] = (
    ("POST", rf"^/v2/models/{NAME}{VERSION}/(?:infer|generate|generate_stream)$"),
    ("GET", r"^/v2(?:/health/(?:live|ready))?$"),
    ("GET", rf"^/v2/models/{NAME}{VERSION}(?:/ready)?$"),
)

GRPC_SERVICE = "inference.GRPCInferenceService"
GRPC_ALLOWED: tuple[str, ...] = (
    "ModelInfer",
    "ModelStreamInfer",
    "ServerLive",
    "ServerReady",
    "ModelReady",
    "ServerMetadata",
    "ModelMetadata",
)
GRPC_PERMISSION_DENIED = 7

REFUSED_PREFIX = "the router carries inference only"
# The path shown in a refusal: only characters that need no escaping in JSON, HTML or a
# grpc-message header; anything else is named, not echoed.
_SHOWN_PATH = r"^[A-Za-z0-9_./~:+,=@-]{1,200}$"


def refusal_map() -> str:
    """The http-level map that makes `$sy_shown_path`, the path a refusal may echo."""
    return "\n".join(
        [
            "map $uri $sy_shown_path {",
            f'    "~{_SHOWN_PATH}" $uri;',
            '    default "(a path of other characters)";',
            "}",
        ]
    )


def plain_path_check(grpc: bool = False) -> list[str]:
    """Location lines that refuse a request whose raw path is not its normalised form."""
    why = "send the path in plain form: no dot segments, repeated slashes or %-escapes"
    return [
        "if ($request_uri != $uri$is_args$args) {",
        *_indent(_refuse(grpc, why)),
        "}",
    ]


def http_locations(allowed_body: list[str]) -> list[str]:
    """The allowed HTTP locations (each checks its method) and the refusing `location /`."""
    lines: list[str] = []
    for method, pattern in HTTP_ALLOWED:
        lines += [
            f'location ~ "{pattern}" {{',
            *_indent(method_check(method)),
            *_indent(plain_path_check()),
            *_indent(allowed_body),
            "}",
        ]
    return [*lines, "location / {", *_indent(_refuse(False)), "}"]


def grpc_locations(allowed_body: list[str]) -> list[str]:
    """The allowed gRPC methods' location and the refusing `location /`."""
    service = GRPC_SERVICE.replace(".", r"\.")
    methods = "|".join(GRPC_ALLOWED)
    return [
        f'location ~ "^/{service}/(?:{methods})$" {{',
        *_indent(method_check("POST", grpc=True)),
        *_indent(plain_path_check(grpc=True)),
        *_indent(allowed_body),
        "}",
        "location / {",
        *_indent(_refuse(True)),
        "}",
    ]


def method_check(method: str, grpc: bool = False) -> list[str]:
    """Location lines that refuse any other method than `method` (first in the location)."""
    return [
        f"if ($request_method != {method}) {{",
        *_indent(_refuse(grpc, f"{method} only")),
        "}",
    ]


def _refuse(grpc: bool, why: str = "") -> list[str]:
    """The lines of one refusal: logged as refused, answered by nginx itself."""
    text = f"{REFUSED_PREFIX}: $request_method $sy_shown_path is refused"
    text += f" ({why})" if why else ""
    if grpc:
        # A trailers-only gRPC answer: HTTP 200, no body, the status in the headers.
        return [
            "set $sy_refused 1;",
            f"add_header grpc-status {GRPC_PERMISSION_DENIED} always;",
            f'add_header grpc-message "{text}" always;',
            "return 200;",
        ]
    return ["set $sy_refused 1;", f'return 403 \'{{"error": "{text}"}}\\n\';']


def _indent(lines: list[str]) -> list[str]:
    return [f"    {line}" for line in lines]
