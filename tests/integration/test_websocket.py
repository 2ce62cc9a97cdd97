"""Websockets through the real ASGI server and the Redis channel layer."""

import json

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from accounts.services import ws_ticket_create
from console.events import SYSTEM_GROUP, system_event
from tests.conftest import in_thread

pytestmark = pytest.mark.django_db(transaction=True)


def _recv(ws) -> dict:
    return json.loads(ws.recv(timeout=10))


def test_message_round_trips_through_the_redis_channel_layer(daphne_server, make_user):
    user = make_user("rita", role="release-managers")
    ticket, _ = ws_ticket_create(user=user, token=None)
    url = f"ws://{daphne_server}/ws/system/?ticket={ticket}"
    with connect(url, origin=f"http://{daphne_server}") as ws:
        assert _recv(ws) == {"type": "hello", "user": "rita"}

        ws.send(json.dumps({"type": "ping", "nonce": "n-1"}))
        assert _recv(ws) == {"type": "pong", "nonce": "n-1", "via": "channel-layer"}

        # From this process through Redis to the daphne process and out to the client.
        message = system_event({"type": "notice", "text": "from the test process"})
        in_thread(async_to_sync(get_channel_layer().group_send), SYSTEM_GROUP, message)
        assert _recv(ws) == {"type": "notice", "text": "from the test process"}


def test_anonymous_websocket_is_refused(daphne_server):
    url = f"ws://{daphne_server}/ws/system/"
    with pytest.raises((InvalidStatus, ConnectionClosed)):
        with connect(url, origin=f"http://{daphne_server}") as ws:
            ws.recv(timeout=10)


def test_bad_ticket_is_refused(daphne_server):
    url = f"ws://{daphne_server}/ws/system/?ticket=not-a-ticket"
    with pytest.raises((InvalidStatus, ConnectionClosed)):
        with connect(url, origin=f"http://{daphne_server}") as ws:
            ws.recv(timeout=10)
