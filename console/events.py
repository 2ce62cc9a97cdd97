"""Websocket group names and payload builders of the console (one module per app)."""

SYSTEM_GROUP = "system"


def system_event(payload: dict) -> dict:
    """A channel-layer message relayed to every client of the system group as-is."""
    return {"type": "system.event", "payload": payload}


def pong(nonce: str | None, via: str) -> dict:
    return {"type": "pong", "nonce": nonce, "via": via}
