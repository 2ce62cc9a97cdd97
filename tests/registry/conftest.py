"""Fixtures of the registry's upload tests: a private artifact store and an algorithm user
whose team owns `risk_score`."""

import pytest
from rest_framework.test import APIClient


@pytest.fixture
def artifacts(settings, tmp_path):
    """The artifact store in the test's own folder."""
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    return settings.SWITCHYARD_STORAGE_ROOT


@pytest.fixture
def ada(make_user, artifacts):
    """An API client of an algorithm user whose team `fraud` owns the model `risk_score`."""
    client = APIClient()
    client.force_authenticate(make_user("ada", role="algorithm"))
    assert client.post("/api/v1/teams/", {"name": "fraud"}, format="json").status_code == 201
    body = {"name": "risk_score", "team": "fraud"}
    assert client.post("/api/v1/models/", body, format="json").status_code == 201
    return client
