"""A production cluster with an nginx router (never started here), a model with two
versions (v1 serving) and a release manager's API client."""

import pytest
from rest_framework.test import APIClient

from tests.release_setup import release_world

BODY = {
    "cluster": "prod",
    "model": "risk_score",
    "candidate_version": 2,
    "steps": [10, 100],
    "step_interval_s": 5,
    "require_benchmark": False,
}


@pytest.fixture
def release_api(settings, tmp_path, make_user):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    world = release_world(make_user)
    client = APIClient()
    client.force_authenticate(world["rita"])
    return client
