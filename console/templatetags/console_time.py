"""Template filters for long actions: how long one took, or has been running."""

from datetime import datetime

from django import template
from django.utils import timezone

register = template.Library()


def _words(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes} min {rest} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


@register.filter
def took(started: datetime | None, finished: datetime | None) -> str:
    """'took 4.2 s' once finished, 'running for 12.0 s' before, '' when it never started."""
    if started is None:
        return ""
    if finished is None:
        return f"running for {_words((timezone.now() - started).total_seconds())}"
    return f"took {_words(max(0.0, (finished - started).total_seconds()))}"
