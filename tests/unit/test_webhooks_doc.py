"""docs/WEBHOOKS.md's verification example accepts what Switchyard signs and refuses
tampered, re-signed and replayed deliveries. Pure: the signing code and the doc only."""

import re
import time
from pathlib import Path

from notifications.signing import headers

DOC = Path(__file__).resolve().parents[2] / "docs" / "WEBHOOKS.md"


def _example():
    [code] = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    scope: dict = {}
    exec(compile(code, str(DOC), "exec"), scope)  # noqa: S102 (our own doc's example)
    return scope["is_from_switchyard"]


def _sent(secret: str, body: bytes, at: float) -> dict:
    sent = headers(secret=secret, timestamp=int(at), body=body, event="e", delivery_id="d")
    return {k: v for k, v in sent.items() if k.startswith("X-Switchyard")}


def test_the_documented_check_accepts_a_real_signature_and_refuses_the_rest():
    is_from_switchyard = _example()
    body = b'{"event":"alert.fired","id":"d"}'
    secret = "doc-example-secret-0123"
    now = time.time()
    assert is_from_switchyard(secret, _sent(secret, body, now), body)
    assert not is_from_switchyard(secret, _sent(secret, body, now), body + b" ")
    assert not is_from_switchyard("another-secret-0000000", _sent(secret, body, now), body)
    assert not is_from_switchyard(secret, _sent(secret, body, now - 301), body)  # replayed
    forged = {**_sent(secret, body, now), "X-Switchyard-Timestamp": str(int(now) + 1)}
    assert not is_from_switchyard(secret, forged, body)
