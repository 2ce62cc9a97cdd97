"""Wait for an async resource to finish: long-poll with ?wait= and poll about once a second."""

import time
from collections.abc import Callable

from switchyard_cli.client import Client
from switchyard_cli.outcome import outcome_of, state_of, waiting_for

LONG_POLL_S = 20


def wait_until_finished(
    client: Client,
    kind: str,
    path: str,
    timeout_s: float,
    on_state: Callable[[dict], None] = lambda payload: None,
    *,
    stop_when_waiting: bool = True,
) -> tuple[dict, str | None]:
    """(last payload, outcome); outcome None when timeout_s ran out first, or when the
    resource waits for a person (its `waiting_for`): waiting longer would not end it."""
    deadline = time.monotonic() + timeout_s
    while True:
        started = time.monotonic()
        left = deadline - started
        wait = max(0, min(LONG_POLL_S, int(left)))
        payload = client.request("GET", path, query={"wait": wait or None}, timeout_s=wait + 30)
        on_state(payload)
        outcome = outcome_of(payload)
        waits = stop_when_waiting and waiting_for(payload)
        if outcome is not None or waits or time.monotonic() >= deadline:
            return payload, outcome
        # A server without long-polling answers at once: poll about once a second.
        pause = 1.0 - (time.monotonic() - started)
        time.sleep(max(0.0, min(pause, deadline - time.monotonic())))


def describe(kind: str, payload: dict) -> str:
    state = state_of(payload)
    if kind == "release":
        weight = payload.get("candidate_weight")
        return f"{state} (candidate {weight}%)" if weight is not None else state
    if kind == "plan":
        waves = payload.get("waves")
        where = f" (wave {payload.get('wave_index', 0) + 1} of {len(waves)})" if waves else ""
        return f"{state}{where}"
    before = payload.get("waits_for") or []
    if kind == "deployment" and before and state == "pending":
        listed = ", ".join(f"#{pk}" for pk in before)
        return (
            f"{state} (after deployment{'s' if len(before) > 1 else ''} {listed} of what it calls)"
        )
    return state
