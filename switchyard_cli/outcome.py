"""One status vocabulary over the API's resources: (finished, outcome) and exit codes.

The server may answer `finished` and `outcome` itself (issue #17); until then each
resource's own status words are mapped here."""

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_TIMEOUT = 0, 1, 2, 3

_WORDS = {
    "version": {"smoke_passed": "succeeded", "smoke_failed": "failed"},
    "deployment": {"succeeded": "succeeded", "failed": "failed", "cancelled": "cancelled"},
    "benchmark": {"succeeded": "succeeded", "failed": "failed", "cancelled": "cancelled"},
    "release": {
        "succeeded": "succeeded",
        "rolled_back": "rolled_back",
        "failed": "failed",
        "cancelled": "cancelled",
    },
}


def state_of(kind: str, payload: dict) -> str:
    """The resource's state word, lower-case."""
    word = payload.get("state") if kind == "release" else payload.get("status")
    return str(word or payload.get("state") or payload.get("status") or "").lower()


def outcome_of(kind: str, payload: dict) -> str | None:
    """succeeded | failed | rolled_back | cancelled, or None while unfinished."""
    if "finished" in payload and "outcome" in payload:
        return payload["outcome"] if payload["finished"] else None
    outcome = _WORDS[kind].get(state_of(kind, payload))
    verdict = payload.get("verdict")
    if kind == "benchmark" and outcome == "succeeded" and isinstance(verdict, dict):
        if verdict.get("passed") is False:
            return "failed"  # the run finished but missed its SLA or baseline
    return outcome


def exit_code(outcome: str | None) -> int:
    if outcome is None:
        return EXIT_TIMEOUT
    return EXIT_OK if outcome == "succeeded" else EXIT_FAILED
