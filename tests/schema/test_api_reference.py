"""docs/API.md is the OpenAPI document rendered: regenerate it, never edit it by hand."""

from io import StringIO

from django.core.management import call_command
from drf_spectacular.generators import SchemaGenerator

from controlplane.api_notes import OPERATION_NOTES
from controlplane.api_reference import operations
from tests.conftest import ROOT

API_MD = ROOT / "docs" / "API.md"
REGENERATE = "regenerate it: python manage.py api_reference > docs/API.md (make api-docs)"


def _document() -> dict:
    return SchemaGenerator().get_schema(request=None, public=True)


def test_the_committed_api_reference_is_the_generated_one():
    out = StringIO()
    call_command("api_reference", stdout=out)
    generated = out.getvalue()
    assert "### POST /api/v1/releases/" in generated
    assert "[CHANGELOG.md](../CHANGELOG.md)" in generated
    assert API_MD.read_text(encoding="utf-8") == generated, f"docs/API.md is stale: {REGENERATE}"


def test_every_operation_has_a_note_and_every_note_an_operation():
    document = _document()
    found = {f"{method.upper()} {path}" for _, method, path, _ in operations(document)}
    assert len(found) > 40
    stale = sorted(set(OPERATION_NOTES) - found)
    assert stale == [], f"controlplane/api_notes.py notes operations that do not exist: {stale}"
    missing = sorted(found - set(OPERATION_NOTES))
    assert missing == [], f"operations without a note in controlplane/api_notes.py: {missing}"


def test_the_notes_and_the_description_reach_the_schema_users_read():
    document = _document()
    assert "## Conventions" in document["info"]["description"]
    operation = document["paths"]["/api/v1/releases/"]["post"]
    assert operation["description"] == OPERATION_NOTES["POST /api/v1/releases/"]
