"""Every list endpoint answers one page (?limit=, ?offset=) as a JSON array, with the total
in X-Total-Count and the next page in a Link header; a release's events have their own."""

import pytest
from rest_framework.test import APIClient

from accounts.pagination import MAX_LIMIT
from deployments.models import TritonCluster, TritonNode
from models_registry.models import Team
from releases.models import Release, ReleaseEvent
from tests.validation.conftest import BODY

pytestmark = pytest.mark.django_db


@pytest.fixture
def reader(make_user):
    client = APIClient()
    client.force_authenticate(make_user("mona", role="managers"))
    return client


def _next(response) -> str:
    link = response.headers["Link"]
    assert link.endswith('>; rel="next"')
    return link[1 : link.index(">")]


def test_lists_are_paged_with_total_and_next_link(reader):
    Team.objects.bulk_create(Team(name=f"team{i:03d}") for i in range(105))
    first = reader.get("/api/v1/teams/")
    assert first.status_code == 200
    assert len(first.json()) == 100 and first.json()[0]["name"] == "team000"
    assert first.headers["X-Total-Count"] == "105"
    second = reader.get(_next(first))
    assert [t["name"] for t in second.json()] == [f"team{i:03d}" for i in range(100, 105)]
    assert "Link" not in second.headers
    page = reader.get("/api/v1/teams/", {"limit": 2, "offset": 3})
    assert [t["name"] for t in page.json()] == ["team003", "team004"]
    assert "offset=5" in _next(page) and "limit=2" in _next(page)


@pytest.mark.parametrize("query", [{"limit": 0}, {"limit": MAX_LIMIT + 1}, {"offset": -1}])
def test_a_bad_page_is_refused_naming_the_parameter(reader, query):
    response = reader.get("/api/v1/clusters/", query)
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == next(iter(query))


def test_clusters_and_nodes_are_paged(reader):
    cluster = TritonCluster.objects.create(name="big", environment="staging")
    TritonCluster.objects.create(name="small", environment="staging")
    TritonNode.objects.bulk_create(
        TritonNode(cluster=cluster, name=f"n{i:02d}", http_url=f"http://127.0.0.1:{i + 1}")
        for i in range(12)
    )
    clusters = reader.get("/api/v1/clusters/", {"limit": 1})
    assert [c["name"] for c in clusters.json()] == ["big"]
    assert clusters.headers["X-Total-Count"] == "2"
    nodes = reader.get("/api/v1/clusters/big/nodes/", {"limit": 5, "offset": 10})
    assert [n["name"] for n in nodes.json()] == ["n10", "n11"]
    assert nodes.headers["X-Total-Count"] == "12"


def test_models_versions_releases_and_benchmarks_lists_carry_the_total(release_api):
    for path in (
        "/api/v1/models/",
        "/api/v1/models/risk_score/versions/",
        "/api/v1/releases/",
        "/api/v1/models/risk_score/versions/1/benchmarks/",
    ):
        response = release_api.get(path, {"limit": 1})
        assert response.status_code == 200, path
        assert isinstance(response.json(), list) and "X-Total-Count" in response.headers, path
    assert release_api.get("/api/v1/models/risk_score/versions/").headers["X-Total-Count"] == "2"


def test_a_release_detail_embeds_its_latest_events_and_the_log_is_paged(release_api):
    created = release_api.post("/api/v1/releases/", BODY, format="json")
    assert created.status_code == 201, created.content
    release = Release.objects.get()
    ReleaseEvent.objects.bulk_create(
        ReleaseEvent(release=release, kind="check", phase="PENDING", message=f"e{i}")
        for i in range(150)
    )
    detail = release_api.get(f"/api/v1/releases/{release.pk}/").json()
    assert len(detail["events"]) == 100 and detail["events"][-1]["message"] == "e149"
    log = release_api.get(f"/api/v1/releases/{release.pk}/events/", {"limit": 60, "offset": 100})
    # The start event, its warning (the model has no SLA) and 150 checks.
    assert created.json()["warnings"] and len(created.json()["warnings"]) == 1
    assert log.headers["X-Total-Count"] == "152"
    assert [e["message"] for e in log.json()] == [f"e{i}" for i in range(98, 150)]
    assert release_api.get("/api/v1/releases/999999/events/").status_code == 404


def test_a_teams_members_are_paged(reader, make_user):
    team = Team.objects.create(name="crowd")
    team.members.add(*(make_user(f"user{i:02d}") for i in range(12)))
    page = reader.get("/api/v1/teams/crowd/members/", {"limit": 5, "offset": 10})
    assert page.status_code == 200
    assert [m["username"] for m in page.json()] == ["user10", "user11"]
    assert page.headers["X-Total-Count"] == "12"
