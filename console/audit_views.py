"""The audit page: every recorded change, filtered by actor, object, action and time, and
the same rows as CSV."""

import csv
import json
from datetime import datetime, timedelta
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from accounts.roles import Role, user_has_role
from audit.selectors import audit_choices, audit_events_filtered
from console.paging import paged

FILTERS = ("actor", "object_type", "object_id", "action")
CSV_MAX_ROWS = 100_000
WEBHOOK_HIDDEN = "(webhook details are shown to release managers only)"


def _sees_webhooks(user) -> bool:
    return user_has_role(user, Role.RELEASE_MANAGERS.value)


def _shown(event, *, sees_webhooks: bool):
    """The event as this viewer may see it: a webhook's URL (rows written before only its host
    was kept carry it whole) and details stay with release managers."""
    is_webhook = event.object_type == "notifications.webhook" or event.action.startswith("webhook.")
    if sees_webhooks or not is_webhook:
        return event
    event.object_repr, event.details = f"webhook {event.object_id}", WEBHOOK_HIDDEN
    return event


def events_shown(events, user) -> list:
    """The events as `user` may see them (see _shown)."""
    sees_webhooks = _sees_webhooks(user)
    return [_shown(e, sees_webhooks=sees_webhooks) for e in events]


def _when(value: str, *, end: bool = False) -> tuple[datetime | None, str]:
    """A date or datetime from the form ('' for none); a bad value is named, not guessed."""
    value = value.strip()
    if not value:
        return None, ""
    parsed = parse_datetime(value)
    if parsed is None and parse_date(value) is not None:
        day = parse_date(value)
        parsed = datetime(day.year, day.month, day.day) + timedelta(days=1 if end else 0)
    if parsed is None:
        return None, f"'{value}' is not a date (use YYYY-MM-DD or YYYY-MM-DDTHH:MM)."
    return (parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed)), ""


def _query(request) -> tuple[dict, dict, list[str]]:
    """(the selector's filters, the form's values, errors in words)."""
    values = {
        name: request.GET.get(name, "").strip()[:200] for name in (*FILTERS, "since", "until")
    }
    since, since_error = _when(values["since"])
    until, until_error = _when(values["until"], end=True)
    filters = {name: values[name] for name in FILTERS}
    filters.update(since=since, until=until)
    errors = [
        e
        for e in (since_error and f"since: {since_error}", until_error and f"until: {until_error}")
        if e
    ]
    return filters, values, errors


@login_required
def audit_list(request):
    filters, values, errors = _query(request)
    listed = paged(request, audit_events_filtered(**filters), values=values)
    page = listed["page"]
    page.object_list = events_shown(page.object_list, request.user)
    query = urlencode({k: v for k, v in values.items() if v})  # the CSV link's filters
    context = {**listed, "values": values, "errors": errors, "query": query, **audit_choices()}
    return render(request, "console/audit/list.html", context)


@login_required
def audit_csv(request):
    filters, _, errors = _query(request)
    if errors:
        return HttpResponse("; ".join(errors), status=400, content_type="text/plain")
    response = HttpResponse(content_type="text/csv")
    response["Content-Disposition"] = 'attachment; filename="audit.csv"'
    writer = csv.writer(response)
    writer.writerow(["time", "actor", "action", "object_type", "object_id", "object", "details"])
    sees_webhooks = _sees_webhooks(request.user)
    for row in audit_events_filtered(**filters)[:CSV_MAX_ROWS].iterator():
        e = _shown(row, sees_webhooks=sees_webhooks)
        writer.writerow(
            [
                e.created_at.isoformat(),
                e.actor_username or "system",
                e.action,
                e.object_type,
                e.object_id,
                _safe(e.object_repr),
                _safe(_json(e.details)),
            ]
        )
    return response


def _json(value) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _safe(text: str) -> str:
    """A cell a spreadsheet will not run as a formula (CSV injection)."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text
