"""One status vocabulary over the API's async resources (API 2.0.0): every version,
deployment, benchmark and release answers `state`, `finished`, `outcome` and
`outcome_reason`, and `waiting_for` while a person must act; the CLI's exit code follows."""

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_TIMEOUT, EXIT_NEEDS_PERSON = 0, 1, 2, 3, 4


def state_of(payload: dict) -> str:
    """The resource's state word (lower-case)."""
    return str(payload.get("state") or "")


def outcome_of(payload: dict) -> str | None:
    """succeeded | failed | rolled_back | cancelled, or None while unfinished."""
    return payload.get("outcome") if payload.get("finished") else None


def waiting_for(payload: dict) -> str | None:
    """What an unfinished resource waits for from a person (None: nothing)."""
    return None if payload.get("finished") else (payload.get("waiting_for") or None)


def exit_code(outcome: str | None) -> int:
    if outcome is None:
        return EXIT_TIMEOUT
    return EXIT_OK if outcome == "succeeded" else EXIT_FAILED
