"""core/represent.py answers what DRF's serializers answer: field by field over plain objects
(every kind of field it compiles, and the cases where DRF's own path must answer), and for
every API list over real rows in PostgreSQL, against DRF's own walk of the same page."""

import datetime as dt
import functools
import json
import zoneinfo

import pytest
from django.core.exceptions import ObjectDoesNotExist
from django.utils import timezone
from rest_framework import serializers
from rest_framework.test import APIClient

from core.represent import rows
from deployments.models import TritonNode
from tests.listing import Rows

UTC = dt.UTC
TOKYO = zoneinfo.ZoneInfo("Asia/Tokyo")
WHEN = dt.datetime(2026, 12, 6, 18, 30, 5, 123456, tzinfo=UTC)


def drf(serializer_class, items, **kwargs):
    return serializer_class(items, many=True, **kwargs).data


def same(serializer_class, items, **kwargs):
    """rows() and DRF agree, key order included; the answer."""
    ours, theirs = rows(serializer_class, items, **kwargs), drf(serializer_class, items, **kwargs)
    assert json.dumps(ours, default=repr) == json.dumps(theirs, default=repr)  # order, types
    assert ours == theirs
    return ours


class Thing:
    def __init__(self, **values):
        self.__dict__.update(values)


class Missing:
    @property
    def gone(self):
        raise ObjectDoesNotExist("no related row")


class Inner(serializers.Serializer):
    a = serializers.IntegerField()
    b = serializers.CharField(required=False)


class Everything(serializers.Serializer):
    n = serializers.IntegerField()
    big = serializers.IntegerField(source="n_as_text")
    f = serializers.FloatField()
    f_from_int = serializers.FloatField(source="n")
    ok = serializers.BooleanField()
    ok_from_text = serializers.BooleanField(source="yes")
    text = serializers.CharField()
    text_from_int = serializers.CharField(source="n")
    email = serializers.EmailField()
    choice = serializers.ChoiceField(choices=[(1, "one"), (2, "two")])
    choice_blank = serializers.ChoiceField(choices=["a", ""], source="blank")
    data = serializers.JSONField()
    binary = serializers.JSONField(binary=True, source="data")
    ro = serializers.ReadOnlyField(source="data")
    at = serializers.DateTimeField()
    at_naive = serializers.DateTimeField()
    at_text = serializers.DateTimeField(source="text")
    at_raw = serializers.DateTimeField(format=None, source="at")
    at_day = serializers.DateTimeField(format="%Y-%m-%d", source="at")
    at_zone = serializers.DateTimeField(default_timezone=TOKYO, source="at")
    day = serializers.DateField()
    nothing = serializers.CharField(allow_null=True)
    nested = Inner()
    nested_none = Inner(allow_null=True)
    nested_many = Inner(many=True)
    inner_a = serializers.IntegerField(source="nested.a")
    through_dict = serializers.CharField(source="mapping.key")
    through_none = serializers.CharField(source="nothing.key", default="fallback")
    method = serializers.SerializerMethodField()
    whole = serializers.CharField(source="*")
    called = serializers.CharField(source="call_me")
    partial = serializers.IntegerField(source="part")
    missing_default = serializers.CharField(source="absent", default="d")
    missing_null = serializers.CharField(source="absent", allow_null=True)
    missing_optional = serializers.CharField(source="absent", required=False)
    gone = serializers.CharField(source="missing.gone")
    listed = serializers.ListField(child=serializers.IntegerField())
    listed_text = serializers.ListField(child=serializers.CharField(), source="listed")
    listed_nested = serializers.ListField(child=Inner(), source="nested_many")
    decimal = serializers.DecimalField(max_digits=5, decimal_places=2, source="f")

    def get_method(self, obj) -> str:
        return f"m{obj.n}"


def _plus(a: int, b: int = 0) -> int:
    return a + b


def _thing(i: int, **more) -> Thing:
    values = dict(
        n=i, n_as_text=str(i), f=i / 3, ok=bool(i % 2), yes="true", text=f"t{i}",
        email=f"u{i}@example.com", choice=i % 2 + 1, blank="", data={"k": [i, None, "x"]},
        at=WHEN + dt.timedelta(hours=i), at_naive=dt.datetime(2026, 1, 1, 12, i),
        day=dt.date(2026, 1, 1 + i), nothing=None, nested=Thing(a=i, b=f"b{i}"),
        nested_none=None, nested_many=[Thing(a=i), {"a": i + 1, "b": "dict"}],
        mapping={"key": f"v{i}"}, call_me=lambda i=i: f"called {i}",
        part=functools.partial(_plus, i), missing=Missing(), listed=[i, None, i + 1],
    )  # fmt: skip
    values.update(more)
    return Thing(**values)


def test_every_compiled_field_and_every_fallback_answers_as_drf():
    answer = same(Everything, [_thing(i) for i in range(1, 4)])
    assert answer[0]["at"] == "2026-12-06T19:30:05.123456Z"
    assert answer[0]["at_zone"] == "2026-12-07T04:30:05.123456+09:00"
    assert answer[0]["called"] == "called 1" and answer[0]["partial"] == 1
    assert answer[0]["gone"] is None and answer[0]["through_none"] == "fallback"
    assert "missing_optional" not in answer[0] and answer[0]["missing_default"] == "d"


def test_dict_rows_and_an_active_time_zone():
    class Flat(serializers.Serializer):
        name = serializers.CharField()
        at = serializers.DateTimeField()
        count = serializers.IntegerField(required=False)

    items = [{"name": "x", "at": WHEN, "count": 3}, {"name": "y", "at": WHEN}]
    with timezone.override(zoneinfo.ZoneInfo("America/New_York")):
        answer = same(Flat, items)
    assert answer == [
        {"name": "x", "at": "2026-12-06T13:30:05.123456-05:00", "count": 3},
        {"name": "y", "at": "2026-12-06T13:30:05.123456-05:00"},
    ]


def test_a_required_missing_source_raises_drfs_own_error():
    class Needs(serializers.Serializer):
        absent = serializers.CharField()

    with pytest.raises(AttributeError) as ours:
        rows(Needs, [Thing()])
    with pytest.raises(AttributeError) as theirs:
        drf(Needs, [Thing()])
    assert str(ours.value) == str(theirs.value) and "Needs" in str(ours.value)


def test_serializers_with_their_own_to_representation_are_asked_themselves():
    class Own(serializers.Serializer):
        n = serializers.IntegerField()

        def to_representation(self, instance):
            return {"own": instance.n * 2}

    class OwnList(serializers.ListSerializer):
        def to_representation(self, data):
            return [{"listed": len(data)}]

    class Listed(serializers.Serializer):
        n = serializers.IntegerField()

        class Meta:
            list_serializer_class = OwnList

    class Holder(serializers.Serializer):
        own = Own(source="*")
        listed = Listed(many=True, source="items")

    items = [Thing(n=1, items=[Thing(n=1), Thing(n=2)])]
    assert same(Holder, items) == [{"own": {"own": 2}, "listed": [{"listed": 2}]}]
    assert same(Own, items) == [{"own": 2}]
    assert same(Listed, items) == [{"listed": 1}]


# ---------------------------------------------------------------- every API list, real rows

API_LISTS = [
    "/api/v1/models/",
    "/api/v1/models/listed/versions/",
    "/api/v1/teams/",
    "/api/v1/releases/",
    "/api/v1/deployments/",
    "/api/v1/benchmarks/",
    "/api/v1/alerts/",
    "/api/v1/clusters/",
    "/api/v1/clusters/list-prod/nodes/",
]


@pytest.mark.django_db
def test_every_api_list_answers_what_drfs_own_walk_answers(settings, tmp_path, make_user):
    """The same requests answered twice: by core/represent.py, then with the page written
    by DRF's own serializer walk instead (the one difference between the two answers)."""
    import accounts.pagination

    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    listing = Rows(make_user("ada", role="algorithm"), make_user("rita", role="release-managers"))
    listing.grow(3)
    for i in range(2):
        TritonNode.objects.create(
            cluster=listing.clusters[0], name=f"n{i}", http_url=f"http://127.0.0.1:{9 + i}"
        )
    api = APIClient()
    api.force_authenticate(listing.rita)
    ours = {url: api.get(url) for url in API_LISTS}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(accounts.pagination, "rows", drf)
        theirs = {url: api.get(url) for url in API_LISTS}
    for url in API_LISTS:
        assert ours[url].status_code == theirs[url].status_code == 200, url
        assert ours[url].content == theirs[url].content, url
        assert json.loads(ours[url].content), url  # something was listed
