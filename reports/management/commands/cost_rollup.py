"""`python manage.py cost_rollup --since 2026-11-01 [--until 2026-12-01T00:00Z]`."""

from datetime import UTC, datetime

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from reports import services


def _when(value: str):
    try:
        parsed = parse_datetime(value)
        if parsed is None and (day := parse_date(value)) is not None:
            parsed = datetime(day.year, day.month, day.day)
    except ValueError:
        parsed = None
    if parsed is None:
        raise CommandError(f"not an ISO date or time: {value!r}")
    return parsed if timezone.is_aware(parsed) else parsed.replace(tzinfo=UTC)


class Command(BaseCommand):
    help = "Rebuild the hourly and daily cost rollups of a range (replacing what was there)."

    def add_arguments(self, parser):
        parser.add_argument("--since", required=True, help="ISO date or time (UTC if naive)")
        parser.add_argument("--until", default=None, help="ISO date or time; default now")

    def handle(self, *args, since: str, until: str | None, **options):
        start, end = _when(since), _when(until) if until else None
        if end is not None and end <= start:
            raise CommandError("--until must be after --since")
        rows = services.cost_rollup_build(since=start, until=end)
        self.stdout.write(f"cost rollups: {rows} hour rows written")
