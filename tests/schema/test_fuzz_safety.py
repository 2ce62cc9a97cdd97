"""The fuzz test's own safety: URLs it sends stay on loopback, and the server's guard
refuses (and records) any connection that would leave 127.0.0.1."""

import subprocess
import sys
import textwrap

import pytest

from tests.conftest import ROOT
from tests.schema.loopback_guard import is_loopback_host
from tests.schema.test_api_fuzz import LOOPBACK_GRPC_TARGETS, LOOPBACK_URLS, loopback_only


def test_every_url_at_any_depth_becomes_a_loopback_one():
    body = {
        "http_url": "http://10.1.2.3:8000",
        "grpc_url": "example.com:8001",
        "router": {"url": "https://example.org", "listen": "127.0.0.1:8080"},
        "metrics": {"source": "prometheus", "URL": "http://192.0.2.1:9090"},
        "nodes": [{"metrics_url": "http://[2001:db8::1]:8002/metrics"}],
        "name": "http://example.com",
    }

    out = loopback_only(body)

    assert out["http_url"] in LOOPBACK_URLS and out["grpc_url"] in LOOPBACK_GRPC_TARGETS
    assert out["router"]["url"] in LOOPBACK_URLS and out["metrics"]["URL"] in LOOPBACK_URLS
    assert out["nodes"][0]["metrics_url"] in LOOPBACK_URLS
    assert out["router"]["listen"] == "127.0.0.1:8080"
    assert out["name"] == "http://example.com"  # not a URL field: never contacted


@pytest.mark.parametrize(
    "host, loopback",
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        (None, True),
        ("10.0.0.1", False),
        ("example.com", False),
        ("0.0.0.0", False),
        ("", False),
        (b"192.0.2.1", False),
    ],
)
def test_loopback_hosts(host, loopback):
    assert is_loopback_host(host) is loopback


def test_the_guard_refuses_and_records_what_would_leave_loopback(tmp_path):
    log = tmp_path / "guard.log"
    script = textwrap.dedent(
        """
        import socket, grpc
        from tests.schema import loopback_guard
        loopback_guard.install()
        for address in [("192.0.2.1", 9), ("example.com", 80)]:
            try:
                socket.create_connection(address, timeout=1)
            except OSError as exc:
                assert "loopback guard" in str(exc), exc
            else:
                raise SystemExit("connected")
        try:
            socket.getaddrinfo("example.org", 443)
        except OSError as exc:
            assert "loopback guard" in str(exc), exc
        channel = grpc.insecure_channel("198.51.100.7:8001")
        channel.close()
        local = socket.socket()
        try:
            local.connect(("127.0.0.1", 9))
        except ConnectionRefusedError:
            pass  # loopback is allowed: refused only because nothing listens
        finally:
            local.close()
        """
    )
    env = {"SWITCHYARD_FUZZ_GUARD_LOG": str(log), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, timeout=60
    )

    assert done.returncode == 0, done.stderr.decode()
    recorded = log.read_text()
    for host in ("192.0.2.1", "example.com", "example.org", "198.51.100.7:8001"):
        assert host in recorded
    assert "127.0.0.1" not in recorded
