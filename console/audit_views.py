"""The audit page: every recorded change, filtered by actor, object, action and time, and
the same rows as CSV."""

import csv
import json
from datetime import datetime, timedelta
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from audit.selectors import audit_choices, audit_events_filtered

FILTERS = ("actor", "object_type", "object_id", "action")
CSV_MAX_ROWS = 100_000


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
    events = audit_events_filtered(**filters)
    page = Paginator(events, 50).get_page(request.GET.get("page"))
    query = urlencode({k: v for k, v in values.items() if v})
    context = {"page": page, "values": values, "errors": errors, "query": query, **audit_choices()}
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
    for e in audit_events_filtered(**filters)[:CSV_MAX_ROWS].iterator():
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
