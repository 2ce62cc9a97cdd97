"""A version's checks say why they ended and what they wait for (issue #30): a skipped smoke
test waits for a person (a staging cluster), a failed one names its error."""

import io

import pytest
from rest_framework.test import APIClient

from deployments.smoke import model_version_smoke_skip
from models_registry.models import ModelVersion
from models_registry.services import model_create, model_version_register, team_create
from tests.registry.archives import example_entries, tar_gz

pytestmark = pytest.mark.django_db


def test_a_skipped_smoke_waits_for_a_person_and_a_failed_one_names_its_error(
    settings, tmp_path, make_user
):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    ada = make_user("ada", role="algorithm")
    team_create(name="fraud", actor=ada)
    model = model_create(name="risk_score", team="fraud", actor=ada)
    version = model_version_register(
        model=model, actor=ada, archive=io.BytesIO(tar_gz(example_entries("risk_score", 1)))
    )
    client = APIClient()
    client.force_authenticate(ada)
    path = "/api/v1/models/risk_score/versions/1/"
    answer = client.get(path).json()
    assert (answer["state"], answer["outcome_reason"], answer["waiting_for"]) == (
        "pending",
        None,
        None,
    )
    model_version_smoke_skip(version_id=version.pk, reason="no idle staging cluster")
    answer = client.get(path).json()
    assert answer["state"] == "pending" and answer["finished"] is False
    assert answer["waiting_for"] == "a smoke test: no idle staging cluster"
    ModelVersion.objects.filter(pk=version.pk).update(
        status=ModelVersion.Status.SMOKE_FAILED,
        validation={"smoke": {"passed": False, "node": "s1", "error": "output shape [2]"}},
    )
    answer = client.get(path).json()
    assert (answer["outcome"], answer["outcome_reason"], answer["waiting_for"]) == (
        "failed",
        "output shape [2]",
        None,
    )
