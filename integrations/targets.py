"""Network addresses the control plane connects to: Triton nodes, metrics, Prometheus, routers.

Plain Python, one set of rules for the API's validation and for the code that connects, so
a stored address is never read differently from how it was checked. `networks` is the
operator's allow-list (setting SWITCHYARD_ALLOWED_TARGET_NETWORKS): when it is not empty,
a target must name an IP literal inside it, or `localhost`, so an API caller cannot make
the server contact another host (SSRF).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence
from urllib.parse import SplitResult, urlsplit

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
MAX_URL_LENGTH = 300
_LOCALHOST = "localhost"


_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*\.?")


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


class TargetError(ValueError):
    """An address that no consumer can use, or one outside the allowed networks."""


def parse_networks(values: str | Iterable[str]) -> tuple[Network, ...]:
    """'10.0.0.0/8, ::1/128' (or a list of CIDRs) -> networks; ValueError on a bad CIDR."""
    items = values.split(",") if isinstance(values, str) else values
    return tuple(ipaddress.ip_network(item.strip(), strict=False) for item in items if item.strip())


def check_host(host: str, networks: Sequence[Network]) -> None:
    """Raise TargetError unless `host` is an IP literal or a DNS name that may be contacted
    under the allow-list."""
    if not _is_ip(host) and not _HOSTNAME.fullmatch(host):
        raise TargetError(f"Host {host[:80]!r} is not an IP address or a host name.")
    if not networks:
        return
    if host.lower() == _LOCALHOST:
        return
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise TargetError(
            f"Host {host!r} must be an IP address inside the allowed networks "
            "(SWITCHYARD_ALLOWED_TARGET_NETWORKS) or localhost."
        ) from None
    if not any(address.version == net.version and address in net for net in networks):
        allowed = ", ".join(str(net) for net in networks)
        raise TargetError(f"Host {host} is outside the allowed networks ({allowed}).")


def url_parts(url: object) -> SplitResult:
    """A non-empty string of at most MAX_URL_LENGTH characters, no spaces, split as a URL."""
    if not isinstance(url, str) or not url:
        raise TargetError("Must be a non-empty string.")
    if len(url) > MAX_URL_LENGTH or any(ch.isspace() or ord(ch) < 32 for ch in url):
        raise TargetError(f"Must be a URL of at most {MAX_URL_LENGTH} characters, no spaces.")
    try:
        return urlsplit(url)
    except ValueError:
        raise TargetError(f"{url!r} is not a URL.") from None


def refuse_credentials(url: str, parts: SplitResult) -> None:
    """TargetError when the URL carries a user, a password or a fragment."""
    if parts.username is not None or parts.password is not None or parts.fragment:
        raise TargetError(f"{url!r} must not carry credentials or a fragment.")


def _split(url: object, schemes: Sequence[str]) -> SplitResult:
    parts = url_parts(url)
    example = f"{schemes[0]}://host:port"
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme not in schemes or not parts.hostname or port is None or port == 0:
        raise TargetError(f"{url!r} must look like {example} (scheme, host and port).")
    refuse_credentials(str(url), parts)
    return parts


def http_base_url(
    url: object, networks: Sequence[Network] = (), *, schemes: Sequence[str] = ("http", "https")
) -> str:
    """A base URL (scheme://host:port, no path) such as a Triton node's HTTP endpoint."""
    parts = _split(url, schemes)
    if parts.path not in ("", "/") or parts.query:
        raise TargetError(f"{url!r} must be a base URL without a path or query.")
    check_host(parts.hostname, networks)
    return str(url)


def http_url(url: object, networks: Sequence[Network] = ()) -> str:
    """An http(s) URL with host and explicit port; a path is allowed (metrics, Prometheus)."""
    parts = _split(url, ("http", "https"))
    check_host(parts.hostname, networks)
    return str(url)


def host_port(value: object, networks: Sequence[Network] = ()) -> tuple[str, int]:
    """'host:port' (gRPC endpoints, listen addresses; '[::1]:8001' for IPv6) -> (host, port)."""
    if not isinstance(value, str) or not value or len(value) > MAX_URL_LENGTH:
        raise TargetError("Must be a non-empty host:port string.")
    try:
        parts = _split(f"tcp://{value.removeprefix('grpc://')}", ("tcp",))
    except TargetError:
        parts = None
    if parts is None or parts.path or parts.query:
        raise TargetError(f"{value!r} must look like host:port (a port is required).")
    check_host(parts.hostname, networks)
    return parts.hostname, parts.port
