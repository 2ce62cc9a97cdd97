"""The API error shape, as a pure function."""

from accounts.errors import flatten_errors


def test_flatten_errors_names_fields_and_drops_non_field_keys():
    detail = {"name": ["Required."], "non_field_errors": ["Bad pair."], "sla": {"p99": ["Low."]}}
    assert flatten_errors(detail) == [
        {"field": "name", "message": "Required."},
        {"message": "Bad pair."},
        {"field": "sla.p99", "message": "Low."},
    ]


def test_flatten_errors_plain_detail():
    assert flatten_errors({"detail": "Not found."}) == [{"message": "Not found."}]
