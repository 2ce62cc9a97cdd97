"""Run daphne with every outgoing connection held to loopback: the fuzz test's safety net.

`python -m tests.schema.loopback_guard <daphne arguments>` installs, before the app loads:

* a Python audit hook on `socket.getaddrinfo`, `socket.connect` and `socket.sendto`
  (tritonclient's HTTP client, http.client, redis-py all pass through them): a host that
  is not loopback is refused with OSError before any packet leaves;
* wrappers around `grpc.insecure_channel` / `grpc.secure_channel` (gRPC's C core opens its
  sockets below Python's audit hooks): a target that is not loopback is pointed at
  127.0.0.1:9 (discard) instead.

* an address-space limit (SWITCHYARD_FUZZ_MEMORY_MB, 4096 by default; the server peaks
  near 1.5 GB of it): a request that would build a huge array in the web process fails
  with MemoryError (a 500 the test reports) instead of exhausting the shared machine.

Every refusal is appended to the file named by SWITCHYARD_FUZZ_GUARD_LOG, which the fuzz
test reads: an empty file proves no request of the run tried to leave 127.0.0.1.
PostgreSQL (libpq) is reached below Python too; its address comes from the test settings.
"""

import ipaddress
import os
import re
import resource
import sys

LOG_PATH = os.environ.get("SWITCHYARD_FUZZ_GUARD_LOG", "")
_GRPC_TARGET = re.compile(r"^(?:dns:///?|ipv4:|ipv6:)?\[?(?P<host>[^\]/]*?)\]?(?::\d+)?$")


def is_loopback_host(host) -> bool:
    """True for None (a local bind), 'localhost' and loopback addresses, nothing else."""
    if host is None:
        return True
    if isinstance(host, bytes):
        host = host.decode(errors="replace")
    host = str(host).strip().strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def _record(what: str) -> None:
    if LOG_PATH:
        with open(LOG_PATH, "a", encoding="utf-8") as log:
            log.write(what + "\n")


def _audit(event: str, args: tuple) -> None:
    if event == "socket.getaddrinfo":
        host = args[0]
    elif event in ("socket.connect", "socket.sendto"):
        address = args[1]
        if not isinstance(address, tuple):  # AF_UNIX paths stay on this machine
            return
        host = address[0]
    else:
        return
    if not is_loopback_host(host):
        _record(f"{event} {host!r}")
        raise OSError(f"loopback guard: {event} to {host!r} refused")


def _guarded_channel(open_channel):
    def channel(target, *args, **kwargs):
        match = _GRPC_TARGET.match(str(target))
        if target and not str(target).startswith("unix:"):
            if match is None or not is_loopback_host(match.group("host")):
                _record(f"grpc.channel {target!r}")
                target = "127.0.0.1:9"
        return open_channel(target, *args, **kwargs)

    return channel


def install() -> None:
    import grpc

    limit = int(os.environ.get("SWITCHYARD_FUZZ_MEMORY_MB", "4096")) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    sys.addaudithook(_audit)
    grpc.insecure_channel = _guarded_channel(grpc.insecure_channel)
    grpc.secure_channel = _guarded_channel(grpc.secure_channel)


if __name__ == "__main__":
    install()
    from daphne.cli import CommandLineInterface

    sys.argv[0] = "daphne"
    CommandLineInterface.entrypoint()
