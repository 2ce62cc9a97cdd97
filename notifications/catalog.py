"""What a webhook can be told, and how each source row reads as an event. Pure: no ORM.

Two sources feed the outbox: audit rows (alerts, failed deployments, registered versions)
and release events (phase changes of gray releases, which are not audited one by one).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

EVENTS = (
    "alert.fired",
    "alert.resolved",
    "release.started",
    "release.step",
    "release.waiting_approval",
    "release.rolled_back",
    "release.promoted",
    "deployment.failed",
    "version.registered",
    "plan.wave_started",
    "plan.waiting_approval",
    "plan.halted",
    "plan.finished",
)
SEVERITIES = ("info", "warning", "critical")  # lowest first
FORMATS = ("json", "slack")

# Audit actions read from the audit trail, and the event each one is.
AUDIT_EVENTS = {
    "alert.fired": "alert.fired",
    "alert.resolved": "alert.resolved",
    "deployment.failed": "deployment.failed",
    "model_version.registered": "version.registered",
    # A release plan's own transitions (plans/tick.py audits them; a person's actions are
    # audited as plan.<action> and are not events).
    "plan.wave_started": "plan.wave_started",
    "plan.waiting_approval": "plan.waiting_approval",
    "plan.halted": "plan.halted",
    "plan.finished": "plan.finished",
}
# Release phases whose entry is an event; a "step" release event is release.step too.
RELEASE_PHASE_EVENTS = {
    "PENDING": "release.started",
    "PROGRESSING": "release.step",
    "WAITING_APPROVAL": "release.waiting_approval",
    "ROLLED_BACK": "release.rolled_back",
    "SUCCEEDED": "release.promoted",
}
RELEASE_EVENT_KINDS = ("phase", "step")
SEVERITY_OF = {
    "deployment.failed": "warning",
    "release.rolled_back": "warning",
    "plan.halted": "warning",
}
PLAN_FIELDS = ("model", "candidate_version", "wave", "waves", "phase", "reason", "clusters")
ALERT_FIELDS = ("kind", "severity", "summary", "cluster", "node", "model", "version")


@dataclass(frozen=True)
class Note:
    """One event read from a source row, ready to be matched against webhooks."""

    event: str
    severity: str
    summary: str
    source: str  # "audit" | "release_event"
    source_id: int
    occurred_at: str  # ISO 8601
    data: dict[str, Any] = field(default_factory=dict)

    def payload(self) -> dict[str, Any]:
        return {
            "event": self.event,
            "severity": self.severity,
            "summary": self.summary,
            "occurred_at": self.occurred_at,
            "source": {"type": self.source, "id": self.source_id},
            "data": self.data,
        }


def severity_rank(name: str) -> int:
    """0 for info, 1 for warning, 2 for critical; an unknown severity ranks as warning."""
    return SEVERITIES.index(name) if name in SEVERITIES else 1


def wants(*, events: list[str], min_severity: str, note: Note) -> bool:
    """True when a webhook with these settings is to be told about `note`."""
    return note.event in events and severity_rank(note.severity) >= severity_rank(min_severity)


def _alert_note(action: str, row: dict[str, Any]) -> Note:
    details = row.get("details") or {}
    data = {name: details.get(name) for name in ALERT_FIELDS}
    alert_id = details.get("alert_id", details.get("id"))
    data["alert_id"] = alert_id if alert_id is not None else (row.get("object_id") or None)
    severity = data["severity"] if data["severity"] in SEVERITIES else "warning"
    state = "fired" if action == "alert.fired" else "resolved"
    summary = f"Alert {state}: {data['summary'] or data['kind'] or 'alert'}"
    return _note(AUDIT_EVENTS[action], severity, summary, row, data)


def _note(event: str, severity: str, summary: str, row: dict, data: dict) -> Note:
    return Note(event, severity, summary, row["source"], row["id"], row["created_at"], data)


def _plan_note(action: str, row: dict[str, Any]) -> Note:
    details = row.get("details") or {}
    data = {"plan_id": row.get("object_id"), **{k: details.get(k) for k in PLAN_FIELDS}}
    if action == "plan.waiting_approval" and details.get("approve_url"):
        data["approve_url"] = details["approve_url"]  # signed: plans/approval_links.py
    what = {
        "plan.wave_started": f"wave {data['wave']} started on {', '.join(data['clusters'] or [])}",
        "plan.waiting_approval": f"wave {data['wave']} waits for approval",
        "plan.halted": f"halted: {data['reason']}",
        "plan.finished": f"ended {str(data['phase']).lower()}: {data['reason']}",
    }[action]
    summary = f"Plan {data['plan_id']} ({data['model']} v{data['candidate_version']}): {what}"
    severity = SEVERITY_OF.get(action, "info")
    if action == "plan.finished" and data["phase"] != "SUCCEEDED":
        severity = "warning"
    return _note(AUDIT_EVENTS[action], severity, summary[:500], row, data)


def note_from_audit(row: dict[str, Any]) -> Note | None:
    """An audit row ({id, action, object_id, object_repr, actor, details, created_at}) as an
    event, or None when its action is not one."""
    action = row.get("action")
    if action not in AUDIT_EVENTS:
        return None
    if action.startswith("alert."):
        return _alert_note(action, row)
    if action.startswith("plan."):
        return _plan_note(action, row)
    event = AUDIT_EVENTS[action]
    details = row.get("details") or {}
    data = {"id": row.get("object_id"), "object": row.get("object_repr"), "actor": row.get("actor")}
    if event == "deployment.failed":
        data["error"] = details.get("error", "")
        summary = f"Deployment failed: {row.get('object_repr')}: {data['error']}"[:500]
    else:
        data.update(digest=details.get("digest"), label=details.get("label"))
        summary = f"Version registered: {row.get('object_repr')} by {row.get('actor') or 'system'}"
    return _note(event, SEVERITY_OF.get(event, "info"), summary, row, data)


def note_from_release_event(row: dict[str, Any]) -> Note | None:
    """A release event ({id, kind, phase, message, data, release: {...}, created_at}) as an
    event, or None when it is not a phase change a webhook can ask for."""
    if row.get("kind") not in RELEASE_EVENT_KINDS:
        return None
    event = "release.step" if row["kind"] == "step" else RELEASE_PHASE_EVENTS.get(row["phase"])
    if event is None:
        return None
    release = row.get("release") or {}
    step = row.get("data") or {}
    data = {**release, "phase": row["phase"], "message": row.get("message", "")}
    if "weight" in step:
        data.update(candidate_weight=step.get("weight"), step_index=step.get("step_index"))
    summary = f"Release {release.get('id')} {event.removeprefix('release.')}: {row['message']}"
    return _note(event, SEVERITY_OF.get(event, "info"), summary[:500], row, data)


def body_of(*, payload: dict[str, Any], delivery_id: str, fmt: str) -> dict[str, Any]:
    """The JSON document POSTed for one delivery, in the webhook's format."""
    if fmt == "slack":  # Slack and Teams incoming webhooks both take {"text": ...}
        return {"text": f"[{payload['severity']}] {payload['event']}: {payload['summary']}"}
    return {"id": delivery_id, **payload}
