"""The API error shape, as a pure function."""

from accounts.errors import _flatten


def test_flatten_names_fields_and_drops_non_field_keys():
    detail = {"name": ["Required."], "non_field_errors": ["Bad pair."], "sla": {"p99": ["Low."]}}
    assert _flatten(detail) == [
        {"field": "name", "message": "Required."},
        {"message": "Bad pair."},
        {"field": "sla.p99", "message": "Low."},
    ]


def test_flatten_plain_detail():
    assert _flatten({"detail": "Not found."}) == [{"message": "Not found."}]
