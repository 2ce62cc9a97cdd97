"""Websocket auth through daphne: single-use, short-lived tickets; revoked tokens refused."""

import json
import time

import pytest
from rest_framework.test import APIClient
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from accounts.models import ApiToken
from accounts.services import api_token_create, ws_ticket_create

pytestmark = pytest.mark.django_db(transaction=True)

REFUSED = (InvalidStatus, ConnectionClosed)


def _hello(server: str, query: str = "", headers: dict | None = None) -> dict:
    """Open /ws/system/, return its hello; raises one of REFUSED when refused."""
    url = f"ws://{server}/ws/system/{query}"
    with connect(url, origin=f"http://{server}", additional_headers=headers) as ws:
        return json.loads(ws.recv(timeout=10))


def _api_ticket(secret: str) -> dict:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    response = client.post("/api/v1/auth/ws-ticket/")
    assert response.status_code == 200, response.content
    return response.json()


def test_a_ticket_from_the_api_opens_one_socket_only(daphne_server, daphne_log, make_user):
    _, secret = api_token_create(user=make_user("rita"), name="script")
    body = _api_ticket(secret)
    assert set(body) == {"ticket", "expires_at"}
    assert _hello(daphne_server, f"?ticket={body['ticket']}") == {"type": "hello", "user": "rita"}
    with pytest.raises(REFUSED):
        _hello(daphne_server, f"?ticket={body['ticket']}")
    log = daphne_log.read()  # the daphne's access log, from this test on
    assert "WSCONNECT /ws/system/" in log
    assert body["ticket"] not in log and secret not in log


def test_an_expired_ticket_is_refused(daphne_server, make_user, settings):
    settings.SWITCHYARD_WS_TICKET_TTL_S = 1
    ticket, _ = ws_ticket_create(user=make_user("rita"), token=None)
    time.sleep(1.5)
    with pytest.raises(REFUSED):
        _hello(daphne_server, f"?ticket={ticket}")


def test_a_ticket_dies_with_its_revoked_token(daphne_server, make_user):
    token, secret = api_token_create(user=make_user("rita"), name="script")
    ticket = _api_ticket(secret)["ticket"]
    client = APIClient()
    client.force_authenticate(token.user)
    assert client.delete(f"/api/v1/auth/tokens/{token.pk}/").status_code == 204
    with pytest.raises(REFUSED):
        _hello(daphne_server, f"?ticket={ticket}")


def test_an_open_socket_of_a_revoked_token_is_closed(daphne_server, make_user):
    token, secret = api_token_create(user=make_user("rita"), name="script")
    ticket = _api_ticket(secret)["ticket"]
    url = f"ws://{daphne_server}/ws/system/?ticket={ticket}"
    with connect(url, origin=f"http://{daphne_server}") as ws:
        assert json.loads(ws.recv(timeout=10))["type"] == "hello"
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
        assert client.delete(f"/api/v1/auth/tokens/{token.pk}/").status_code == 204
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4401
    assert ApiToken.objects.get(pk=token.pk).revoked_at is not None


def test_a_long_lived_token_in_the_url_is_no_longer_accepted(daphne_server, make_user):
    _, secret = api_token_create(user=make_user("rita"), name="script")
    with pytest.raises(REFUSED):
        _hello(daphne_server, f"?token={secret}")


def test_the_browser_session_still_opens_sockets(daphne_server, make_user, client):
    client.force_login(make_user("rita"))
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    assert _hello(daphne_server, headers={"Cookie": cookie})["user"] == "rita"
