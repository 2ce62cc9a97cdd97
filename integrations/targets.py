"""Network addresses the control plane connects to: Triton nodes, metrics, Prometheus, routers.

Plain Python, one set of rules for the API's validation and for the code that connects, so
a stored address is never read differently from how it was checked. `networks` is the
operator's allow-list (setting SWITCHYARD_ALLOWED_TARGET_NETWORKS): when it is not empty,
every address a target names must lie inside it; when it is empty, only public addresses
pass (never private, loopback, link-local, unspecified, multicast, reserved or IPv4-mapped
IPv6 ones), so an API caller cannot make the server contact an inside host (SSRF). A host
name is resolved and every address it resolves to is checked (`localhost` is no exception);
code that connects on a user's say-so connects to the checked address itself
(`checked_addresses`), so a name cannot resolve elsewhere between check and connect.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable, Sequence
from urllib.parse import SplitResult, urlsplit

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address
MAX_URL_LENGTH = 300


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


class UnresolvedTarget(TargetError):
    """A host name that resolves to no address (now: it may resolve later)."""


def is_public(address: Address) -> bool:
    """True for a globally routed unicast address; IPv4-mapped IPv6 is never public."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return False
    inside = (
        address.is_private
        or address.is_loopback
        or address.is_link_local
        or address.is_unspecified
        or address.is_multicast
        or address.is_reserved
    )
    return address.is_global and not inside


def address_allowed(address: Address, networks: Sequence[Network]) -> bool:
    """Inside the allow-list when there is one; a public address when there is none."""
    if networks:
        return any(address.version == net.version and address in net for net in networks)
    return is_public(address)


def resolve(host: str) -> tuple[Address, ...]:
    """Every address `host` names (an IP literal names itself); UnresolvedTarget if none."""
    try:
        return (ipaddress.ip_address(host),)
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise UnresolvedTarget(f"Host {host[:80]!r} does not resolve ({exc}).") from None
    found = (ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos)
    return tuple(dict.fromkeys(found))


def checked_addresses(host: str, networks: Sequence[Network]) -> tuple[Address, ...]:
    """The addresses `host` resolves to now, every one allowed; TargetError otherwise."""
    if not _is_ip(host) and not _HOSTNAME.fullmatch(host):
        raise TargetError(f"Host {host[:80]!r} is not an IP address or a host name.")
    addresses = resolve(host)
    for address in addresses:
        if address_allowed(address, networks):
            continue
        named = host if str(address) == host else f"{host} ({address})"
        if networks:
            allowed = ", ".join(str(net) for net in networks)
            raise TargetError(f"Host {named} is outside the allowed networks ({allowed}).")
        raise TargetError(
            f"Host {named} is not a public address; list its network in "
            "SWITCHYARD_ALLOWED_TARGET_NETWORKS to allow it."
        )
    return addresses


def check_host(host: str, networks: Sequence[Network]) -> None:
    """Raise TargetError unless `host` (an IP literal or a name, resolved now) names only
    addresses that may be contacted under the allow-list."""
    checked_addresses(host, networks)


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


def endpoints_of(pairs: Iterable[tuple[str, int]]) -> frozenset[tuple[Address, int]]:
    """(address, port) of every (host, port) that resolves now; hosts that do not are left out
    (a service the control plane cannot reach is no target either)."""
    found = set()
    for host, port in pairs:
        try:
            found.update((address, port) for address in resolve(host))
        except TargetError:
            continue
    return frozenset(found)


def hits_endpoint(address: Address, port: int, endpoints: Iterable[tuple[Address, int]]) -> bool:
    """True when (address, port) may reach one of `endpoints`: the same port at the same
    address, or where either side is loopback or unspecified (a local service listening on
    every interface answers there too)."""
    for known, known_port in endpoints:
        if port != known_port:
            continue
        near = (
            address.is_loopback
            or address.is_unspecified
            or known.is_loopback
            or known.is_unspecified
        )
        if address == known or near:
            return True
    return False
