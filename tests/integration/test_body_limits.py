"""Request bodies are limited per endpoint by the real daphne process, as they arrive."""

import json
import select
import socket
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.conftest import daphne_process

MIB = 1024 * 1024
BODY_MIB = 100


def _head(port: int, path: str, framing: str) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\n{framing}\r\n\r\n"
    ).encode()


def _answer(sock: socket.socket) -> tuple[int, bytes]:
    data = b""
    while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < _length(data):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def _length(data: bytes) -> int:
    for line in data.split(b"\r\n\r\n", 1)[0].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


def _send_big_body(port: int, chunked: bool) -> tuple[int, bytes, int]:
    """POST a 100 MiB JSON body to the token endpoint, stopping once an answer is readable:
    (status, body, bytes sent)."""
    framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {BODY_MIB * MIB}"
    piece = b'{"username": "' + b"x" * (MIB - 20) + b'"'
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(_head(port, "/api/v1/auth/token/", framing))
        try:
            while sent < BODY_MIB * MIB and not select.select([sock], [], [], 0)[0]:
                data = piece[: BODY_MIB * MIB - sent]
                sock.sendall(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
                sent += len(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        status, body = _answer(sock)
    return status, body, sent


def _vm_hwm_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith("VmHWM:"))
    return int(line.split()[1])


@pytest.mark.django_db(transaction=True)
def test_fifty_parallel_100_mib_bodies_are_refused_with_memory_bounded(tmp_path):
    with daphne_process(tmp_path / "daphne.log") as (proc, port):
        with ThreadPoolExecutor(50) as pool:
            futures = [pool.submit(_send_big_body, port, n % 2 == 0) for n in range(50)]
            results = [future.result(timeout=300) for future in futures]
        hwm_mib = _vm_hwm_kib(proc.pid) / 1024
    for status, body, sent in results:
        assert status == 413
        message = json.loads(body)["errors"][0]["message"]
        assert message == f"The request body is larger than the limit of {MIB} bytes."
        assert sent < BODY_MIB * MIB  # the answer came while the body was still being sent
    assert hwm_mib < 300, f"daphne's peak RSS was {hwm_mib:.0f} MiB"


@pytest.mark.django_db(transaction=True)
def test_a_declared_length_is_refused_before_any_body_byte_and_uploads_may_be_larger(
    daphne_server,
):
    port = int(daphne_server.rpartition(":")[2])
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(_head(port, "/api/v1/auth/token/", f"Content-Length: {MIB + 1}"))
        status, body = _answer(sock)  # no body byte was sent
    assert status == 413
    assert json.loads(body)["errors"][0]["field"] is None
    # The version upload takes archives past 1 MiB: this one reaches the app (anonymous).
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        framing = f"Content-Length: {2 * MIB}"
        sock.sendall(_head(port, "/api/v1/models/m/versions/", framing) + b"x" * 2 * MIB)
        status, _ = _answer(sock)
    assert status in (401, 403)
    # A small JSON body goes through as before.
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        body = b'{"username": "nobody", "password": "wrong"}'
        sock.sendall(_head(port, "/api/v1/auth/token/", f"Content-Length: {len(body)}") + body)
        status, _ = _answer(sock)
    assert status == 401


@pytest.mark.django_db(transaction=True)
def test_a_malformed_multipart_body_is_answered_by_the_api_in_its_error_shape(daphne_server):
    """Twisted would answer a multipart body it cannot parse with a bare 400 (no body, no
    Content-Type) before the app saw it; the app answers it, as JSON."""
    port = int(daphne_server.rpartition(":")[2])
    for ctype, body in (
        ("multipart/form-data; boundary=b", b"--b--"),
        ("multipart/form-data", b"garbage"),
    ):
        framing = f"Content-Length: {len(body)}"
        head = _head(port, "/api/v1/auth/token/", framing).replace(
            b"application/json", ctype.encode()
        )
        with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
            sock.sendall(head + body)
            status, answer = _answer(sock)
        assert status == 400, answer
        assert json.loads(answer)["errors"][0]["message"], answer
