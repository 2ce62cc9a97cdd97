"""No N+1: every main list, in the API and in the console, costs the same number of queries
with 2 rows as with 20 (bench/api_scale.py measures how fast they are at 10,000), and so do
the pages bench/dashboard_load.py loads, with more models serving on more nodes."""

import os
import re
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from deployments.freezes import freeze_window_create
from deployments.models import Deployment, TritonCluster, TritonNode
from deployments.services import node_create, serving_state_set
from models_registry.models import Model
from models_registry.selectors import CHOICE_VERSIONS_PER_MODEL, version_choices, version_chosen
from releases.models import Release
from tests.conftest import drop_prefixed
from tests.listing import Rows

pytestmark = pytest.mark.django_db

API_LISTS = [
    "/api/v1/models/",
    "/api/v1/models/listed/versions/",
    "/api/v1/releases/",
    "/api/v1/deployments/",
    "/api/v1/benchmarks/",
    "/api/v1/alerts/",
    "/api/v1/clusters/",
]
CONSOLE_LISTS = [
    "/models/",
    "/models/listed/",
    "/releases/",
    "/deployments/",
    "/benchmarks/",
    "/alerts/?state=all",
    "/audit/",
    "/clusters/",
]


def _queries(get, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        response = get(url)
    assert response.status_code == 200, (url, response.content[:300])
    return len(queries)


@pytest.fixture
def rows(settings, tmp_path, make_user):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    return Rows(make_user("ada", role="algorithm"), make_user("rita", role="release-managers"))


def test_every_api_list_costs_the_same_queries_with_2_rows_as_with_20(rows):
    api = APIClient()
    api.force_authenticate(rows.rita)
    rows.grow(2)
    few = {url: _queries(api.get, url) for url in API_LISTS}
    rows.grow(18)
    many = {url: _queries(api.get, url) for url in API_LISTS}
    assert many == few
    assert all(int(api.get(url)["X-Total-Count"]) >= 20 for url in API_LISTS)  # rows grew


def test_every_console_list_costs_the_same_queries_with_2_rows_as_with_20(rows, client):
    client.force_login(rows.rita)
    rows.grow(2)
    few = {url: _queries(client.get, url) for url in CONSOLE_LISTS}
    rows.grow(18)
    many = {url: _queries(client.get, url) for url in CONSOLE_LISTS}
    assert many == few


def _serving(rows, cluster: TritonCluster, count: int) -> None:
    """`count` more of the rows' models serving on `cluster`, each on a node of its own,
    and a freeze window each (the cluster page lists them)."""
    now = timezone.now()
    for _ in range(count):
        rows.grow(1)
        i = rows.made
        model = Model.objects.get(name=f"listed_{i}")
        serving_state_set(cluster=cluster, model=model, versions=[model.versions.get()])
        node_create(
            cluster=cluster, actor=rows.rita, name=f"n{i}", http_url=f"http://127.0.1.{i}:9"
        )
        start = now + timedelta(days=i)
        freeze_window_create(
            actor=rows.rita, reason=f"freeze {i}", cluster=cluster, starts_at=start,
            ends_at=start + timedelta(hours=2),
        )  # fmt: skip


def _cold_cache(settings) -> str:
    """An empty cache namespace of the test's own (under the session's prefix, which the
    session drops): the pages compute their shared values (core/shared.py) anew, so a count
    never depends on whether another test or worker cached one a moment before (a release's
    cost card is keyed by its id, and each worker's database numbers its own)."""
    prefix = f"{os.environ['SWITCHYARD_TEST_CACHE_PREFIX']}:cold-{uuid.uuid4().hex[:8]}"
    default = {**settings.CACHES["default"], "KEY_PREFIX": prefix}
    settings.CACHES = {**settings.CACHES, "default": default}
    return prefix


def test_the_pages_the_dashboard_loads_cost_the_same_queries_with_2_models_as_with_8(
    rows, client, settings
):
    """The cluster page, its live page, the home, the model's live page and a release's
    cockpit: 2 models serving on 2 nodes, then 8 on 8, with their alerts, deployments and
    freezes; each count from an empty cache, so the pages' shared work is counted too."""
    client.force_login(rows.rita)
    cluster = TritonCluster.objects.get(name="list-prod")
    _serving(rows, cluster, 2)
    release = Release.objects.filter(cluster=cluster).order_by("id").first()
    # Begun ten minutes ago: its cost card reads whole minutes at both counts (a release begun
    # within the current minute has none to read, one minute later it has).
    Release.objects.filter(pk=release.pk).update(created_at=timezone.now() - timedelta(minutes=10))
    pages = ["/clusters/list-prod/", "/clusters/list-prod/live/", "/", "/models/listed/live/",
             f"/releases/{release.pk}/"]  # fmt: skip
    prefixes = [_cold_cache(settings)]
    few = {url: _queries(client.get, url) for url in pages}
    _serving(rows, cluster, 6)
    prefixes.append(_cold_cache(settings))
    many = {url: _queries(client.get, url) for url in pages}
    for prefix in prefixes:
        drop_prefixed(prefix)
    assert many == few
    assert cluster.nodes.count() == 8 and cluster.serving.count() == 8  # rows grew


def test_the_deploy_and_release_forms_list_each_models_newest_and_take_a_typed_one(rows, client):
    client.force_login(rows.rita)
    rows.grow(12)  # `listed` has versions 1..13; listed_1..listed_12 one each
    per_model = CHOICE_VERSIONS_PER_MODEL
    for url in ("/releases/", "/clusters/list-prod/"):
        page = client.get(url).content.decode()
        shown = [int(n) for n in re.findall(r">listed v(\d+) \(", page)]
        assert shown == list(range(13, 13 - per_model, -1)), (url, shown)  # newest first
        assert all(f">listed_{i} v1 (" in page for i in range(1, 13))
        assert 'data-testid="version-typed"' in page
    forms = ("/releases/", "/clusters/list-prod/", "/plans/")
    few = {url: _queries(client.get, url) for url in forms}
    rows.grow(3)
    assert {url: _queries(client.get, url) for url in forms} == few
    # An option reads its id, number, label and model name: no config or manifest decoded.
    assert {"config_text", "config_json", "manifest", "validation", "notes"} <= (
        version_choices()[0].get_deferred_fields()
    )

    # An older version, not listed, typed as "model vN": deployed as it names (the node is a
    # row only: nothing runs the deployment in this test's transaction).
    # On a cluster with no deployment pending (the rows' are on list-prod and list-stage).
    cluster = TritonCluster.objects.get(name="list-1")
    TritonNode.objects.create(cluster=cluster, name="n1", http_url="http://127.0.0.1:9")
    answer = client.post(
        "/clusters/list-1/deploy/", {"version_id": "", "version": "listed v2"}, follow=True
    )
    assert answer.status_code == 200
    deployment = Deployment.objects.order_by("-id").first()
    assert (deployment.model.name, deployment.version.version) == ("listed", 2)
    assert deployment.requested_by == rows.rita and deployment.cluster == cluster
    wrong = client.post("/clusters/list-1/deploy/", {"version": "listed v999"}, follow=True)
    assert "Choose a model version to deploy (or type one: model vN)." in wrong.content.decode()
    assert Deployment.objects.order_by("-id").first() == deployment


def test_a_typed_version_is_read_as_model_and_number(rows):
    assert version_chosen(typed="listed v1") == rows.base
    assert version_chosen(typed=" listed:1 ") == rows.base
    assert version_chosen(typed="listed v", version_id=str(rows.base.pk)) is None  # typed wins
    assert version_chosen(typed="v1") is None and version_chosen(typed="nope v1") is None
    assert version_chosen(version_id=str(rows.base.pk)) == rows.base
    assert version_chosen(version_id="1; drop") is None and version_chosen() is None
