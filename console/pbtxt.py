"""A small syntax highlighter for protobuf text format (config.pbtxt), HTML-escaped."""

import re

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

TOKEN = re.compile(
    r"""(?P<comment>\#[^\n]*)
      | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
      | (?P<key>[A-Za-z_][A-Za-z0-9_]*)(?=\s*[:{\[])
      | (?P<enum>\b[A-Z][A-Z0-9_]+\b)
      | (?P<number>-?\b\d+(?:\.\d+)?(?:[eE][-+]?\d+)?\b)
      | (?P<ident>\b(?:true|false)\b)
    """,
    re.VERBOSE,
)


def highlight_pbtxt(text: str) -> SafeString:
    """Wrap comments, strings, keys, enums and numbers in <span class="pb-...">."""
    out, last = [], 0
    for match in TOKEN.finditer(text):
        out.append(escape(text[last : match.start()]))
        kind = match.lastgroup
        out.append(f'<span class="pb-{kind}">{escape(match.group())}</span>')
        last = match.end()
    out.append(escape(text[last:]))
    return mark_safe("".join(out))  # noqa: S308 - every piece above is escaped
