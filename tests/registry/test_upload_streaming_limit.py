"""The upload size limit holds while the body streams in, also for chunked requests that
carry no Content-Length, against the real ASGI server."""

import http.client
import json
import os
import uuid

import pytest
from django.test import Client

from models_registry.models import ModelVersion
from tests.registry.archives import example_entries, tar_gz

LIMIT = 512 * 1024
CSRF = "c" * 32  # a CSRF secret of our own: the cookie and the header must match


@pytest.fixture
def small_upload_limit(monkeypatch, tmp_path):
    """Children (daphne) read their settings from the environment."""
    monkeypatch.setenv("SWITCHYARD_MAX_UPLOAD_BYTES", str(LIMIT))
    monkeypatch.setenv("SWITCHYARD_STORAGE_ROOT", str(tmp_path / "artifacts"))


@pytest.fixture
def ada_session(make_user):
    from models_registry.services import model_create, team_create

    ada = make_user("ada", role="algorithm")
    team_create(name="fraud", actor=ada)
    model_create(name="risk_score", team="fraud", actor=ada)
    client = Client()
    client.force_login(ada)
    return client.cookies["sessionid"].value


def _multipart(archive: bytes) -> tuple[str, bytes]:
    boundary = uuid.uuid4().hex
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="archive"; filename="m.tar.gz"'
        "\r\nContent-Type: application/gzip\r\n\r\n"
    ).encode()
    return (
        f"multipart/form-data; boundary={boundary}",
        head + archive + f"\r\n--{boundary}--\r\n".encode(),
    )


def _post(server: str, session: str, archive: bytes, *, chunked: bool):
    content_type, body = _multipart(archive)
    headers = {
        "Content-Type": content_type,
        "Cookie": f"sessionid={session}; csrftoken={CSRF}",
        "X-CSRFToken": CSRF,
        "Referer": f"http://{server}/",
    }
    host, port = server.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        if chunked:
            chunks = (body[i : i + 65536] for i in range(0, len(body), 65536))
            conn.request(
                "POST",
                "/api/v1/models/risk_score/versions/",
                body=chunks,
                headers=headers,
                encode_chunked=True,
            )
        else:
            conn.request("POST", "/api/v1/models/risk_score/versions/", body=body, headers=headers)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def _archive(extra_bytes: int) -> bytes:
    return tar_gz([*example_entries("risk_score", 1), ("1/noise.bin", os.urandom(extra_bytes))])


@pytest.mark.parametrize("chunked", [True, False])
def test_an_upload_over_the_limit_is_refused_with_413_in_the_error_shape(
    small_upload_limit, daphne_server, ada_session, chunked
):
    status, body = _post(daphne_server, ada_session, _archive(2 * LIMIT), chunked=chunked)
    assert status == 413, body
    message = json.loads(body)["errors"][0]["message"]
    assert f"larger than the limit of {LIMIT} bytes" in message
    assert ModelVersion.objects.count() == 0


def test_a_chunked_upload_under_the_limit_registers_like_any_other(
    small_upload_limit, daphne_server, ada_session
):
    status, body = _post(daphne_server, ada_session, _archive(1000), chunked=True)
    assert status == 201, body
    assert json.loads(body)["version"] == 1
