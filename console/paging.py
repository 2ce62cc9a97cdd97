"""Every console list is one page of its rows, filtered like the API's list of the same rows
(the same filter names, checked by the API's own filter serializer where it has one), with
page links and "first-last of N". The page number is `?page=`; filters travel in every link."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.core.paginator import Paginator
from rest_framework import serializers

PER_PAGE = 50


def api_filters(request, serializer_class: type[serializers.Serializer]) -> tuple[dict, dict, list]:
    """(the valid filters for the selector, the form's values as typed, errors in words): the
    API answers 400 for a bad filter; a page shows it and lists without that filter."""
    names = list(serializer_class().fields)
    values = {name: request.GET.get(name, "").strip()[:200] for name in names}
    given = {name: value for name, value in values.items() if value}
    check = serializer_class(data=given)
    if check.is_valid():
        return dict(check.validated_data), values, []
    errors = [f"{name}: {' '.join(str(e) for e in why)}" for name, why in check.errors.items()]
    kept = serializer_class(data={k: v for k, v in given.items() if k not in check.errors})
    kept.is_valid()
    return dict(getattr(kept, "validated_data", {}) or {}), values, errors


def _link(number, url, current: int) -> dict:
    """A page link, or the ellipsis between them (no url)."""
    is_page = isinstance(number, int)
    link = url(number) if is_page else ""
    return {"number": number, "url": link, "is_current": number == current}


def paged(request, items: Any, *, values: dict[str, str], per_page: int = PER_PAGE) -> dict:
    """{"page": the requested page of `items`, "pager": what `console/_pager.html` shows}."""
    page = Paginator(items, per_page).get_page(request.GET.get("page"))
    query = {k: v for k, v in values.items() if v}

    def url(number: int) -> str:
        return "?" + urlencode({**query, "page": number})

    numbers = page.paginator.get_elided_page_range(page.number, on_each_side=2, on_ends=1)
    pager = {
        "total": page.paginator.count,
        "first": page.start_index(),
        "last": page.end_index(),
        "number": page.number,
        "num_pages": page.paginator.num_pages,
        "previous_url": url(page.previous_page_number()) if page.has_previous() else "",
        "next_url": url(page.next_page_number()) if page.has_next() else "",
        "links": [
            {
                "number": n,
                "url": url(n) if isinstance(n, int) else "",
                "is_current": n == page.number,
            }
            for n in numbers
        ],
    }
    return {"page": page, "pager": pager}
