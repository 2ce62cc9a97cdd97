"""The demo's writes go through the product services: its rows are in the audit trail like
any other (and a demo user's password is not)."""

import pytest

from audit.models import AuditEvent
from demo.seed import demo_cluster_register
from demo.users import demo_logins, demo_users_create

pytestmark = pytest.mark.django_db


def test_demo_users_are_audited_without_their_passwords(settings, tmp_path):
    settings.SWITCHYARD_VAR_DIR = tmp_path
    logins = demo_users_create()
    assert demo_logins() == logins and len(logins) == 4
    events = AuditEvent.objects.filter(action="user.demo_created")
    assert sorted(e.object_repr for e in events) == ["ada", "admin", "max", "rita"]
    demo_users_create()  # the next run resets them
    assert AuditEvent.objects.filter(action="user.demo_reset").count() == 4
    stored = str(list(AuditEvent.objects.values_list("details", flat=True)))
    assert not [x for x in logins if x["password"] in stored]


def test_the_demo_cluster_and_its_nodes_follow_the_ports_through_audited_services(
    settings, tmp_path, django_user_model
):
    settings.SWITCHYARD_VAR_DIR = tmp_path
    demo_users_create()
    admin = django_user_model.objects.get(username="admin")
    cluster, lines = demo_cluster_register(base_port=31000, nodes=2, actor=admin)
    assert lines == [] and cluster.router["listen"] == "127.0.0.1:31080"
    assert AuditEvent.objects.filter(action="cluster.created").count() == 1
    assert AuditEvent.objects.filter(action="node.created").count() == 2
    demo_cluster_register(base_port=31000, nodes=2, actor=admin)  # same ports: nothing written
    assert AuditEvent.objects.filter(action__in=["cluster.updated", "node.removed"]).count() == 0
    cluster, lines = demo_cluster_register(base_port=32000, nodes=2, actor=admin)
    assert cluster.router["url"] == "http://127.0.0.1:32080"
    urls = sorted(cluster.nodes.values_list("http_url", flat=True))
    assert urls == ["http://127.0.0.1:32000", "http://127.0.0.1:32003"]
    assert AuditEvent.objects.filter(action="cluster.updated").count() == 1
    assert AuditEvent.objects.filter(action="node.removed").count() == 2
    assert AuditEvent.objects.filter(action="node.created").count() == 4


def test_the_demo_smoke_tests_on_a_node_of_its_own_that_serves_nothing(
    settings, tmp_path, django_user_model
):
    from demo.seed import demo_cluster_seed, demo_models_register
    from deployments.models import TritonCluster
    from deployments.services import serving_state_set
    from deployments.smoke import smoke_node

    settings.SWITCHYARD_VAR_DIR = tmp_path
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    demo_users_create()
    assert demo_cluster_seed(base_port=31000, nodes=2) == []
    admin = django_user_model.objects.get(username="admin")
    first = demo_models_register(actor=admin)[0]
    local = TritonCluster.objects.get(name="local")
    serving_state_set(cluster=local, model=first.model, versions=[first])  # as demo_seed's push
    node, why = smoke_node()
    assert why == "" and (node.cluster.name, node.http_url) == (
        "local-smoke",
        "http://127.0.0.1:31006",
    )
    assert node.cluster.environment == "staging" and not node.cluster.serving.exists()
    assert demo_cluster_seed(base_port=31000, nodes=2) == []  # again: nothing written
    assert AuditEvent.objects.filter(action="node.created").count() == 3


def test_the_demo_benchmarks_one_sample_version_once_on_the_smoke_node(
    settings, tmp_path, django_user_model
):
    from benchmarks.models import BenchmarkRun
    from demo.benchmark import SAMPLE, demo_benchmark_seed
    from demo.seed import SMOKE_CLUSTER, demo_cluster_seed, demo_models_register

    settings.SWITCHYARD_VAR_DIR = tmp_path
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    demo_users_create()
    demo_cluster_seed(base_port=31000, nodes=2)
    admin = django_user_model.objects.get(username="admin")
    demo_models_register(actor=admin)
    lines = demo_benchmark_seed(cluster_name=SMOKE_CLUSTER, actor=admin)
    run = BenchmarkRun.objects.get()  # queued after commit: the worker runs it
    assert (run.version.model.name, run.version.version) == SAMPLE
    assert run.status == "pending" and run.node.cluster.name == SMOKE_CLUSTER
    assert lines == [f"benchmarking risk_score v2 on {SMOKE_CLUSTER} (its cost shows as benchmark)"]
    assert demo_benchmark_seed(cluster_name=SMOKE_CLUSTER, actor=admin) == []  # once
    assert AuditEvent.objects.filter(action="benchmark.created").count() == 1


def test_the_demo_fleet_and_its_plan_example_follow_the_ports_once(
    settings, tmp_path, django_user_model
):
    """eu and us: one node and one router each, after local's nodes and the smoke node; the
    plan example is started once, as admin, when risk_score serves on every cluster."""
    from demo.fleet import demo_fleet_register, demo_fleet_serving, demo_plan_seed
    from demo.seed import demo_cluster_seed, demo_models_register
    from deployments.models import TritonCluster
    from deployments.services import serving_state_set
    from plans.models import ReleasePlan

    settings.SWITCHYARD_VAR_DIR = tmp_path
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    demo_users_create()
    admin = django_user_model.objects.get(username="admin")
    assert demo_cluster_seed(base_port=31000, nodes=2) == []
    assert demo_fleet_register(base_port=31000, nodes=2, actor=admin) == []
    eu, us = TritonCluster.objects.get(name="eu"), TritonCluster.objects.get(name="us")
    assert eu.router["listen"] == "127.0.0.1:31082" and us.router["listen"] == "127.0.0.1:31083"
    assert [n.http_url for n in eu.nodes.all()] == ["http://127.0.0.1:31009"]
    assert [n.http_url for n in us.nodes.all()] == ["http://127.0.0.1:31012"]
    assert demo_fleet_register(base_port=31000, nodes=2, actor=admin) == []  # nothing new
    assert AuditEvent.objects.filter(action="node.created").count() == 3 + 2
    first = demo_models_register(actor=admin)[0]
    assert first.model.name == "risk_score" and not demo_fleet_serving()
    for name in ("local", "eu", "us"):  # as the deployments do once they succeed
        cluster = TritonCluster.objects.get(name=name)
        serving_state_set(cluster=cluster, model=first.model, versions=[first])
    assert demo_fleet_serving()
    lines = demo_plan_seed(actor=admin, console_url="http://127.0.0.1:8000/")
    plan = ReleasePlan.objects.get()
    assert lines == [
        "release plan example: risk_score v2 through eu -> us -> local; a release manager "
        f"approves it at http://127.0.0.1:8000/plans/{plan.pk}/"
    ]
    assert (plan.created_by, plan.candidate.version, plan.on_failure) == (admin, 2, "rollback")
    assert [(w["clusters"], w["approval"]) for w in plan.waves] == [
        (["eu"], True), (["us"], False), (["local"], True)]  # fmt: skip
    assert demo_plan_seed(actor=admin, console_url="http://x") == []  # once
