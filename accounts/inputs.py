"""Request bodies as API.md promises them: unknown fields refused, choice errors that list
the valid choices (issue #17). Every JSON write's input serializer derives from
`InputSerializer`; query serializers use `ChoicesListed`."""

from collections.abc import Mapping

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers


def _list_choices(field: serializers.Field) -> None:
    target = getattr(field, "child", field)
    if isinstance(target, serializers.ChoiceField):
        valid = ", ".join(f'"{choice}"' for choice in target.choices)
        message = f'"{{input}}" is not a valid choice; valid choices: {valid}.'
        target.error_messages["invalid_choice"] = message


class ChoicesListed(serializers.Serializer):
    """A serializer whose choice errors name every valid choice."""

    def get_fields(self) -> dict:
        fields = super().get_fields()
        for field in fields.values():
            _list_choices(field)
        return fields


class InputSerializer(ChoicesListed):
    """A request body: fields it does not know are refused with 400, each one named.

    Read-only fields of a serializer used both ways are known, so a body copied from a GET
    answer is accepted (they are ignored as before).
    """

    def to_internal_value(self, data):
        if isinstance(data, Mapping):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                known = ", ".join(sorted(n for n, f in self.fields.items() if not f.read_only))
                message = f"Unknown field; the known fields are: {known}."
                raise serializers.ValidationError({name: [message] for name in unknown})
        return super().to_internal_value(data)


@extend_schema_field(OpenApiTypes.BINARY)
class UploadField(serializers.FileField):
    """A file part of a multipart body, documented as binary so generated clients send bytes."""
