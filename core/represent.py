"""A list of rows as DRF's serializers write it, without DRF's walk per row and per field.

`serializer_class(items, many=True).data` asks every field of every row, in turn, for its
attribute (`Field.get_attribute`: a source walk, a Mapping check, a callable check, an
exception handler) and then for its representation (a DateTimeField looks up the current
time zone and the output format again for each value). A page of 100 rows of 20 fields
costs some 2,000 of those walks: about a fifth of a plain DRF list's CPU in the web process,
more for the product's lists of nested rows (bench/README.md, api_scale).

`rows(serializer_class, items)` answers the same list: it binds the serializer's fields
once, as DRF does, and compiles each into a getter and a writer once per call, with what
does not vary between rows (the time zone, a choice field's mapping, a method field's bound
method) looked up once. Only what is plainly the same as DRF's own code is compiled: a
field of a type it knows exactly (not a subclass, which may override either step) with a
plain attribute source; every other field, and any value not of the expected type, goes
through the field's own `get_attribute` and `to_representation`, so the answer is DRF's
whatever the serializer holds. A serializer (or list serializer) class with a
`to_representation` of its own is asked itself. tests/core/test_represent.py holds the
two equal field by field.
"""

from __future__ import annotations

import datetime as dt
import functools
import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from django.db.models.manager import BaseManager
from rest_framework import fields as drf_fields
from rest_framework import serializers
from rest_framework.relations import PKOnlyObject
from rest_framework.settings import api_settings
from rest_framework.utils.serializer_helpers import ReturnList

Row = Callable[[Any], Any]
# What DRF calls (or refuses, a builtin) when it finds it on a source path (is_simple_callable).
_CALLABLE = (types.FunctionType, types.MethodType, functools.partial, types.BuiltinFunctionType)
_ISO = drf_fields.ISO_8601


def rows(serializer_class, items: Iterable, **kwargs) -> ReturnList:
    """`serializer_class(items, many=True, **kwargs).data`, compiled (see the module)."""
    many = serializer_class(many=True, **kwargs)
    many.instance = items
    return ReturnList(_many(many)(items), serializer=many)


def row_writer(serializer: serializers.BaseSerializer) -> Row:
    """instance -> what `serializer.to_representation(instance)` answers."""
    if isinstance(serializer, serializers.ListSerializer):
        return _many(serializer)
    if type(serializer).to_representation is not serializers.Serializer.to_representation:
        return serializer.to_representation
    steps = [(f.field_name, *_source(f), _writer(f)) for f in serializer._readable_fields]

    def write(instance) -> dict:
        out = {}
        mapping = isinstance(instance, Mapping)
        for name, attrs, field, put in steps:
            try:
                if attrs is None:
                    value = field.get_attribute(instance)
                else:
                    try:
                        value = _read(instance, attrs, mapping)
                    except (KeyError, AttributeError):
                        value = _missing(field, instance)
                    except _Called:
                        value = field.get_attribute(instance)
            except drf_fields.SkipField:
                continue
            none = value.pk if isinstance(value, PKOnlyObject) else value
            out[name] = None if none is None else put(value)
        return out

    return write


def _many(serializer: serializers.ListSerializer) -> Row:
    if type(serializer).to_representation is not serializers.ListSerializer.to_representation:
        return serializer.to_representation
    child = row_writer(serializer.child)

    def write(items) -> list:
        return [child(item) for item in (items.all() if isinstance(items, BaseManager) else items)]

    return write


def _source(field: drf_fields.Field) -> tuple[tuple[str, ...] | None, drf_fields.Field]:
    """(the attribute path read directly, the field) or (None, the field) for a field whose
    `get_attribute` is its own (related fields: the pk-only object) or whose source is the
    whole instance."""
    own = type(field).get_attribute is not drf_fields.Field.get_attribute
    return (None if own or not field.source_attrs else tuple(field.source_attrs)), field


class _Called(Exception):
    """A callable on the source's path: DRF calls it, so its own get_attribute answers."""


def _read(instance, attrs: tuple[str, ...], mapping: bool):
    """DRF's `get_attribute(instance, attrs)` while no value on the path is callable
    (`_Called` then); a missing key or attribute raises as it does there."""
    value = instance
    for attr in attrs:
        try:
            value = value[attr] if mapping else getattr(value, attr)
        except ObjectDoesNotExist:
            return None  # as DRF's get_attribute answers a missing related object
        if isinstance(value, _CALLABLE):
            raise _Called
        mapping = len(attrs) > 1 and isinstance(value, Mapping)
    return value


def _missing(field: drf_fields.Field, instance):
    """What `Field.get_attribute` answers when the source is missing: the field's default,
    None when it allows null, SkipField when it is not required, else its own error."""
    if field.default is not drf_fields.empty:
        return field.get_default()
    if field.allow_null:
        return None
    if not field.required:
        raise drf_fields.SkipField()
    return field.get_attribute(instance)


def _writer(field: drf_fields.Field) -> Row:
    """value (not None) -> field.to_representation(value)."""
    if isinstance(field, serializers.BaseSerializer):
        return row_writer(field)
    kind = type(field)
    own = field.to_representation
    if kind is drf_fields.SerializerMethodField:
        return getattr(field.parent, field.method_name)
    if kind in (drf_fields.CharField, drf_fields.EmailField, drf_fields.SlugField):
        return lambda value: value if type(value) is str else own(value)
    if kind is drf_fields.IntegerField:
        return lambda value: value if type(value) is int else own(value)
    if kind is drf_fields.FloatField:
        return lambda value: value if type(value) is float else own(value)
    if kind is drf_fields.BooleanField:
        return lambda value: value if type(value) is bool else own(value)
    if kind is drf_fields.ReadOnlyField:
        return lambda value: value
    if kind is drf_fields.JSONField and not field.binary:
        return lambda value: value
    if kind is drf_fields.ChoiceField:
        choices = field.choice_strings_to_values
        return lambda value: value if value == "" else choices.get(str(value), value)
    if kind is drf_fields.DateTimeField:
        return _datetime_writer(field)
    if kind is drf_fields.ListField:
        item = _writer(field.child)
        return lambda value: [None if v is None else item(v) for v in value]
    return own


def _datetime_writer(field: drf_fields.DateTimeField) -> Row:
    """DRF's ISO 8601 form of an aware datetime in the field's zone ('Z' for UTC)."""
    own = field.to_representation
    if getattr(field, "format", api_settings.DATETIME_FORMAT) != _ISO:
        return own
    zone = field.timezone if hasattr(field, "timezone") else field.default_timezone()
    if zone is None:
        return own

    def write(value):
        if type(value) is not dt.datetime or value.utcoffset() is None:
            return own(value)
        try:
            text = value.astimezone(zone).isoformat()
        except OverflowError:
            return own(value)  # DRF's own error
        return text[:-6] + "Z" if text.endswith("+00:00") else text

    return write
