"""Lists that read less: a row's own columns and, of each related object, only the columns a
list shows.

A list of 100 releases built every related version, cluster and user whole: their configs,
manifests and settings decoded from JSON and their times parsed, for a name or a number
each. A related column left out is read on first use with a query per row, so every list
built with `only_shown` is held to a constant number of queries by tests/test_list_queries.py.
"""

from django.db.models import QuerySet


def only_shown(qs: QuerySet, *related: str) -> QuerySet:
    """`qs` with all of its model's own columns and, of the objects it joins
    (select_related), only the `related` ones ("cluster__name", "version__model__name")."""
    own = [field.name for field in qs.model._meta.concrete_fields]
    return qs.only(*own, *related)
