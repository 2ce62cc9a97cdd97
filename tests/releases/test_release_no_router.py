"""A release on a cluster without a router says on its cockpit what happens instead of weights:
traffic follows Triton's highest READY version, the gates judge from the candidate's READY,
and a rollback unloads the candidate."""

import pytest
from rest_framework.test import APIClient

from deployments.services import cluster_create, serving_state_set
from tests.release_setup import release_world

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(settings, tmp_path, make_user):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    world = release_world(make_user)
    api = APIClient()
    api.force_authenticate(world["rita"])
    return {**world, "api": api}


def _release_page(world, client, *, cluster: str, candidate: int, strategy: str) -> str:
    answer = world["api"].post(
        "/api/v1/releases/",
        {
            "cluster": cluster,
            "model": "risk_score",
            "candidate_version": candidate,
            "strategy": strategy,
            "require_benchmark": False,
        },
        format="json",
    )
    assert answer.status_code == 201, answer.content
    client.force_login(world["ada"])
    return client.get(f"/releases/{answer.json()['id']}/").content.decode()


def _bare_cluster(world, serving: int):
    bare = cluster_create(actor=world["rita"], name="bare", environment="staging", router={})
    version = world["versions"][serving - 1]
    serving_state_set(cluster=bare, model=world["model"], versions=[version])
    return bare


def test_the_cockpit_of_a_release_without_a_router_says_what_happens_instead(world, client):
    _bare_cluster(world, serving=1)
    page = _release_page(world, client, cluster="bare", candidate=2, strategy="blue_green")
    assert 'data-testid="no-router-notice"' in page
    assert "No router on bare: weights cannot be honoured while both versions are loaded." in page
    assert "unversioned requests with its highest READY version" in page
    assert "/v2/models/risk_score/versions/1/infer" in page
    assert (
        "v2 takes all unversioned traffic on each node as soon as it is READY there "
        "(after Triton&#x27;s warm-up), while the release still reads LOADING at 0%."
    ) in page
    assert "The gates and the fast guard judge v2 from then on" in page
    assert "Rolling back unloads v2: unversioned traffic returns to v1 once v2 is" in page


def test_an_older_candidate_without_a_router_is_said_to_take_traffic_only_at_success(world, client):
    _bare_cluster(world, serving=2)
    page = _release_page(world, client, cluster="bare", candidate=1, strategy="blue_green")
    assert "v1 is older than v2, so v2 keeps all unversioned traffic while both are" in page
    assert "Rolling back unloads v1; v2 never stops taking unversioned traffic." in page


def test_a_routed_release_shows_no_such_notice(world, client):
    page = _release_page(world, client, cluster="prod", candidate=2, strategy="blue_green")
    assert 'data-testid="no-router-notice"' not in page and "highest READY" not in page
