"""Webhook events, severities, payload formats and signatures: pure code, no services."""

import hashlib
import hmac

import pytest

from notifications.catalog import (
    body_of,
    note_from_audit,
    note_from_release_event,
    severity_rank,
    wants,
)
from notifications.signing import signature, verify

AT = "2026-12-01T08:00:00+00:00"


def _audit(action: str, **details) -> dict:
    return {
        "source": "audit",
        "id": 7,
        "action": action,
        "object_id": "42",
        "object_repr": "thing",
        "actor": "",
        "details": details,
        "created_at": AT,
    }


def _release_event(kind: str, phase: str, **data) -> dict:
    release = {"id": 3, "model": "risk", "cluster": "prod"}
    return {
        "source": "release_event",
        "id": 9,
        "kind": kind,
        "phase": phase,
        "message": "why",
        "data": data,
        "release": release,
        "created_at": AT,
    }


def test_an_alert_audit_row_carries_every_field_of_the_contract():
    row = _audit(
        "alert.fired",
        alert_id=5,
        kind="silent_failure",
        severity="critical",
        summary="risk v2 answers errors",
        cluster="prod",
        node="n1",
        model="risk",
        version=2,
    )
    note = note_from_audit(row)
    assert (note.event, note.severity, note.source_id) == ("alert.fired", "critical", 7)
    assert note.data["alert_id"] == 5 and note.data["node"] == "n1" and note.data["version"] == 2
    assert "risk v2 answers errors" in note.summary
    resolved = note_from_audit({**row, "action": "alert.resolved"})
    assert resolved.event == "alert.resolved" and "resolved" in resolved.summary


@pytest.mark.parametrize(
    ("action", "event", "severity"),
    [
        ("deployment.failed", "deployment.failed", "warning"),
        ("model_version.registered", "version.registered", "info"),
        ("deployment.succeeded", None, None),
        ("alert.acknowledged", None, None),
    ],
)
def test_audit_actions_map_to_events(action, event, severity):
    note = note_from_audit(_audit(action, error="boom"))
    if event is None:
        assert note is None
    else:
        assert (note.event, note.severity) == (event, severity)


@pytest.mark.parametrize(
    ("kind", "phase", "event"),
    [
        ("phase", "PENDING", "release.started"),
        ("phase", "PROGRESSING", "release.step"),
        ("step", "PROGRESSING", "release.step"),
        ("phase", "WAITING_APPROVAL", "release.waiting_approval"),
        ("phase", "ROLLED_BACK", "release.rolled_back"),
        ("phase", "SUCCEEDED", "release.promoted"),
        ("phase", "LOADING", None),
        ("check", "PROGRESSING", None),
        ("analysis", "PROGRESSING", None),
    ],
)
def test_release_events_map_to_phase_changes(kind, phase, event):
    note = note_from_release_event(_release_event(kind, phase, weight=50.0, step_index=1))
    if event is None:
        assert note is None
    else:
        assert note.event == event and note.data["model"] == "risk"
        assert note.data["candidate_weight"] == 50.0


def test_the_alert_id_falls_back_to_the_audited_object():
    assert note_from_audit(_audit("alert.fired", alert_id=0)).data["alert_id"] == 0
    assert note_from_audit(_audit("alert.fired")).data["alert_id"] == "42"  # object_id


def test_severity_filter_and_event_filter():
    note = note_from_audit(_audit("alert.fired", severity="warning", kind="node_down"))
    assert wants(events=["alert.fired"], min_severity="info", note=note)
    assert wants(events=["alert.fired"], min_severity="warning", note=note)
    assert not wants(events=["alert.fired"], min_severity="critical", note=note)
    assert not wants(events=["alert.resolved"], min_severity="info", note=note)
    assert severity_rank("bogus") == severity_rank("warning")


def test_slack_format_is_one_text_field_and_json_carries_the_delivery_id():
    payload = note_from_audit(_audit("deployment.failed", error="n1: boom")).payload()
    slack = body_of(payload=payload, delivery_id="d-1", fmt="slack")
    assert list(slack) == ["text"] and "deployment.failed" in slack["text"]
    assert "[warning]" in slack["text"]
    plain = body_of(payload=payload, delivery_id="d-1", fmt="json")
    assert plain["id"] == "d-1" and plain["event"] == "deployment.failed"
    assert plain["source"] == {"type": "audit", "id": 7}


def test_signature_is_hmac_sha256_of_timestamp_dot_body_and_verify_refuses_replays():
    body = b'{"event":"alert.fired"}'
    sent = signature(secret="s3cret-s3cret-s3cret", timestamp=1_700_000_000, body=body)
    expected = hmac.new(b"s3cret-s3cret-s3cret", b"1700000000." + body, hashlib.sha256)
    assert sent == "sha256=" + expected.hexdigest()
    kwargs = {"secret": "s3cret-s3cret-s3cret", "signature_header": sent, "body": body}
    assert verify(timestamp="1700000000", now=1_700_000_100, **kwargs)
    assert not verify(timestamp="1700000000", now=1_700_000_301, **kwargs)  # replayed late
    assert not verify(timestamp="1700000001", now=1_700_000_100, **kwargs)  # other time
    assert not verify(timestamp="x", now=1_700_000_100, **kwargs)
    tampered = {**kwargs, "body": body + b" "}
    assert not verify(timestamp="1700000000", now=1_700_000_100, **tampered)


@pytest.mark.parametrize(
    ("action", "phase", "severity", "words"),
    [
        ("plan.wave_started", "RUNNING", "info", "wave 2 started on eu, us"),
        ("plan.waiting_approval", "WAITING_APPROVAL", "info", "wave 2 waits for approval"),
        ("plan.halted", "HALTED", "warning", "halted: wave 2: eu: rolled_back"),
        ("plan.finished", "SUCCEEDED", "info", "ended succeeded"),
        ("plan.finished", "ROLLED_BACK", "warning", "ended rolled_back"),
    ],
)
def test_a_plans_transitions_are_events_with_the_plan_in_their_data(action, phase, severity, words):
    details = {"model": "risk", "candidate_version": 4, "wave": 2, "waves": 3, "phase": phase,
               "reason": "wave 2: eu: rolled_back", "clusters": ["eu", "us"]}  # fmt: skip
    note = note_from_audit(_audit(action, **details))
    assert note is not None and note.event == action and note.severity == severity
    assert note.summary.startswith("Plan 42 (risk v4): ") and words in note.summary
    assert note.data["plan_id"] == "42" and note.data["clusters"] == ["eu", "us"]
    assert note_from_audit(_audit("plan.halt", comment="x")) is None  # a person's request
