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
