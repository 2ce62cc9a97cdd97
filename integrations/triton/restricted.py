"""Triton's restricted APIs: the node key, the server flags that ask for it, the headers that
carry it, and the check of whether a node asks for it at all (docs/TRITON.md §restricted).

Plain Python. Facts measured on the 2.51 binary:

* `--http-restricted-api=<api>[,<api>...]:<header>=<value>` (a colon before the header: the
  comma form its --help shows is refused at start) and `--grpc-restricted-protocol=` alike;
* an HTTP call without the header, or with another value, answers 403 with
  `{"error":"This API is restricted, expecting header '<header>'"}`;
* gRPC reads the metadata `triton-grpc-protocol-<header>` and answers UNAVAILABLE
  `This protocol is restricted, expecting header 'triton-grpc-protocol-<header>'`;
* neither message nor the server log ever contains the value.
"""

from __future__ import annotations

import http.client
import re
from dataclasses import dataclass, field
from urllib.parse import urlsplit

# Model control and what lets a caller read or write the node's memory, traces and logs.
RESTRICTED_APIS = ("model-repository", "shared-memory", "trace", "logging")
GRPC_HEADER_PREFIX = "triton-grpc-protocol-"
REFUSED_MARKER = "is restricted, expecting header"
# gRPC metadata keys are lower-case; the key travels in a header and on Triton's command
# line (`:`, `,` and `=` are its separators), so both stay in a plain token alphabet.
_HEADER_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
KEY_RE = re.compile(r"^[A-Za-z0-9._~+/-]{16,256}$")
KEY_RULE = "16 to 256 characters of letters, digits and . _ ~ + / -"


class NodeKeyError(ValueError):
    """A header name or key value Triton or gRPC could not carry."""


def check_header_name(header: str) -> str:
    """The header name when gRPC metadata can carry it (lower-case token), else NodeKeyError."""
    if not isinstance(header, str) or not _HEADER_RE.match(header):
        raise NodeKeyError(
            f"{header!r} is not a usable header name: lower-case letters, digits and '-' "
            "(gRPC metadata keys are lower-case)."
        )
    return header


def check_key(value: str) -> str:
    """The key when a header and Triton's command line can carry it, else NodeKeyError."""
    if not isinstance(value, str) or not KEY_RE.match(value):
        raise NodeKeyError(f"A node key must be {KEY_RULE}.")
    return value


@dataclass(frozen=True)
class NodeKey:
    """The header a node's restricted APIs ask for and its value (never shown by repr)."""

    header: str
    value: str = field(repr=False)

    def __post_init__(self) -> None:
        check_header_name(self.header)
        check_key(self.value)

    def http_headers(self) -> dict[str, str]:
        return {self.header: self.value}

    def grpc_headers(self) -> dict[str, str]:
        return {f"{GRPC_HEADER_PREFIX}{self.header}": self.value}

    def server_flags(self) -> list[str]:
        """tritonserver's flags restricting RESTRICTED_APIS over HTTP and gRPC to this key."""
        apis = ",".join(RESTRICTED_APIS)
        setting = f"{apis}:{self.header}={self.value}"
        return [f"--http-restricted-api={setting}", f"--grpc-restricted-protocol={setting}"]

    def redact(self, text: str) -> str:
        """`text` with the value replaced (for anything that might quote a command line)."""
        return text.replace(self.value, "<node key>")


def is_key_refusal(reason: str | None) -> bool:
    """True when a node's answer says a restricted API was called without the right key."""
    return bool(reason) and REFUSED_MARKER in reason


def answers_without_key(http_url: str, *, timeout_s: float) -> bool | None:
    """Whether the node lists its repository to a caller without any key.

    POST /v2/repository/index: True on 200 (anyone reaching the port can load and unload),
    False on 401/403 (restricted), None when it cannot tell (unreachable, other status).
    """
    parts = urlsplit(http_url)
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = kind(parts.hostname or "127.0.0.1", parts.port, timeout=timeout_s)
    try:
        conn.request("POST", "/v2/repository/index", body=b"{}")
        status = conn.getresponse().status
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()
    if status == 200:
        return True
    return False if status in (401, 403) else None
