"""Console forms checked by the API's own input serializers: a form posts what the API's body
would hold, so the rules (limits, choices, shapes) live in one place and a page says in words
what the API would answer with its 400."""

import re

from rest_framework import serializers

from accounts.errors import flatten_errors

_WAVE = re.compile(r"\bwaves\.(\d+)")


def _words(entry: dict) -> str:
    field = entry.get("field")
    if not field:
        return entry["message"]
    field = _WAVE.sub(lambda m: f"wave {int(m.group(1)) + 1}", field).replace(".", " ")
    return f"{field}: {entry['message']}"


def api_checked(serializer_class: type[serializers.Serializer], body: dict) -> tuple[dict, list]:
    """(the validated values, []) or ({}, the errors in words, one a line)."""
    check = serializer_class(data=body)
    if check.is_valid():
        return dict(check.validated_data), []
    return {}, [_words(e) for e in flatten_errors(check.errors)]
