"""Print daphne's listening endpoints: 127.0.0.1 and every IPv4 address of this container
outside the networks named in SWITCHYARD_WEB_UNLISTENED_NETWORKS (comma-separated CIDRs).

The compose kit puts the web process on the nodes' data network so it can read them, and
names that network here: nothing on it reaches the console, the API or the admin pages.
Run by deploy/containers/switchyard.sh; stdlib only.
"""

from __future__ import annotations

import fcntl
import ipaddress
import os
import socket
import struct
import sys

SIOCGIFADDR = 0x8915


def own_ipv4_addresses() -> list[str]:
    """The IPv4 address of each network interface that has one (loopback included)."""
    found = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        for _, name in socket.if_nameindex():
            request = struct.pack("256s", name.encode()[:15])
            try:
                answer = fcntl.ioctl(probe.fileno(), SIOCGIFADDR, request)
            except OSError:  # an interface without an IPv4 address
                continue
            found.append(socket.inet_ntoa(answer[20:24]))
    return found


def endpoints(port: int, unlistened: list[str]) -> list[str]:
    networks = [ipaddress.ip_network(n.strip()) for n in unlistened if n.strip()]
    kept = {"127.0.0.1"} | {
        a for a in own_ipv4_addresses() if not any(ipaddress.ip_address(a) in n for n in networks)
    }
    return [f"tcp:port={port}:interface={a}" for a in sorted(kept)]


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8000
    unlistened = os.environ.get("SWITCHYARD_WEB_UNLISTENED_NETWORKS", "").split(",")
    for endpoint in endpoints(port, unlistened):
        print("-e", endpoint)
