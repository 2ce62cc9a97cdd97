"""A cluster's router, metrics and repository settings are typed where they enter, and a
junk value already stored makes its consumer refuse that cluster cleanly."""

import logging

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from deployments import push
from deployments.models import TritonCluster
from deployments.services import cluster_create
from releases.selectors import router_view
from releases.tasks import routers_sync

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(make_user):
    rita = make_user("rita", role="release-managers")
    cluster_create(actor=rita, name="demo", environment="staging", router={"driver": "none"})
    client = APIClient()
    client.force_authenticate(rita)
    return client


def _patch(api, body):
    return api.patch("/api/v1/clusters/demo/", body, format="json")


@pytest.mark.parametrize(
    "body, field",
    [
        ({"router": {"driver": "nginx", "listen": "127.0.0.1:9000", "foo": 1}}, "router.foo"),
        ({"router": {"driver": "none", "listen": "127.0.0.1:9000"}}, "router.listen"),
        ({"router": {"driver": "nginx"}}, "router.listen"),
        ({"router": {"driver": "nginx", "listen": "0.0.0.0:80"}}, "router.listen"),
        ({"router": {"driver": "nginx", "listen": ["127.0.0.1:1"]}}, "router.listen"),
        ({"router": {"driver": "haproxy"}}, "router.driver"),
        ({"router": {"driver": "none", "url": "http://10.0.0.1:80"}}, "router.url"),
        ({"router": {"driver": "none", "url": "127.0.0.1:80"}}, "router.url"),
        ({"router": "nginx"}, "router"),
        ({"metrics": {"source": "prometheus"}}, "metrics.url"),
        ({"metrics": {"source": "scrape", "interval": 1}}, "metrics.interval"),
        ({"metrics": {"source": "prometheus", "url": "http://169.254.169.254:80"}}, "metrics.url"),
        ({"push_mode": "filesystem"}, "repository_path"),
        ({"gpu_type": "x" * 101}, "gpu_type"),  # a model-level check: used to answer 500
    ],
)
def test_unusable_cluster_settings_are_refused_and_nothing_changes(api, body, field):
    before = TritonCluster.objects.values().get(name="demo")
    response = _patch(api, body)
    assert response.status_code == 400, response.content
    assert response.json()["errors"][0]["field"] == field
    assert TritonCluster.objects.values().get(name="demo") == before


def test_garbage_router_with_push_mode_is_refused_in_one_patch(api):
    """The fuzzed value that left the demo cluster unable to deploy."""
    response = _patch(api, {"push_mode": "filesystem", "router": {"driver": "nginx", "x": {}}})
    assert response.status_code == 400
    cluster = TritonCluster.objects.get(name="demo")
    assert (cluster.push_mode, cluster.router) == ("upload", {"driver": "none"})


@pytest.mark.parametrize(
    "body, field",
    [
        ({"router": {"driver": "nginx", "listen": "127.0.0.1:9", "prefix_dir": "/etc/sy"}}, None),
        ({"push_mode": "filesystem", "repository_path": "/etc"}, "repository_path"),
        ({"push_mode": "filesystem", "repository_path": "relative/repo"}, "repository_path"),
    ],
)
def test_folders_outside_the_configured_roots_are_refused(api, body, field):
    response = _patch(api, body)
    assert response.status_code == 400, response.content
    assert response.json()["errors"][0]["field"] == (field or "router.prefix_dir")


def test_a_folder_climbing_out_of_its_root_is_refused(api, settings, tmp_path):
    root = tmp_path / "repos"
    root.mkdir()
    settings.SWITCHYARD_REPOSITORY_ROOTS = [str(root)]
    (root / "escape").symlink_to("/etc")
    for path in (f"{root}/../elsewhere", f"{root}/escape"):
        response = _patch(api, {"push_mode": "filesystem", "repository_path": path})
        assert response.status_code == 400, path
    ok = _patch(api, {"push_mode": "filesystem", "repository_path": str(root / "fleet")})
    assert ok.status_code == 200, ok.content


def test_valid_settings_are_stored_as_given(api, tmp_path):
    router = {
        "driver": "nginx",
        "url": "http://127.0.0.1:9000",
        "listen": "127.0.0.1:9000",
        "prefix_dir": str(tmp_path / "router"),
    }
    metrics = {"source": "prometheus", "url": "http://127.0.0.1:9090/prom"}
    response = _patch(api, {"router": router, "metrics": metrics})
    assert response.status_code == 200, response.content
    assert (response.json()["router"], response.json()["metrics"]) == (router, metrics)


def _store_junk(name: str, **fields) -> TritonCluster:
    TritonCluster.objects.filter(name=name).update(**fields)  # as an old demo DB may hold
    return TritonCluster.objects.get(name=name)


def test_run_router_refuses_a_stored_junk_router_with_the_key(api):
    _store_junk("demo", router={"driver": "nginx", "listen": "0.0.0.0:80"})
    with pytest.raises(CommandError, match="router.listen"):
        call_command("run_router", cluster="demo")


def test_router_sync_skips_a_junk_cluster_and_goes_on(api, make_user, tmp_path, caplog):
    rita = make_user("rosa", role="release-managers")
    router = {"driver": "nginx", "listen": "127.0.0.1:9", "prefix_dir": str(tmp_path / "ok")}
    cluster_create(actor=rita, name="good", environment="staging", router=router)
    junk = _store_junk("demo", router={"driver": "nginx", "listen": "127.0.0.1:9", "x": 1})
    with caplog.at_level(logging.WARNING):
        assert routers_sync() == 0
    assert "router of demo not synced" in caplog.text and "router.x" in caplog.text
    assert "router of good" not in caplog.text
    assert router_view(cluster=junk)["error"].startswith("router.x")


def test_push_refuses_a_stored_repository_outside_the_roots(api, settings, tmp_path):
    settings.SWITCHYARD_REPOSITORY_ROOTS = [str(tmp_path / "repos")]
    outside = tmp_path / "elsewhere"
    cluster = _store_junk("demo", push_mode="filesystem", repository_path=str(outside))
    plan = push.LoadPlan(model="m", versions=[], config_json="{}", config_dict={})
    with pytest.raises(push.RepositoryRefused, match="repository_path"):
        push.materialize(cluster.repository_path, [], plan)
    assert not outside.exists()
