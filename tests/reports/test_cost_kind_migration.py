"""The migration that adds cost kinds moves stored rows of temporary names onto their model."""

from datetime import UTC, datetime

import pytest

from deployments.models import TritonCluster
from tests.conftest import migrate_to

pytestmark = pytest.mark.usefixtures("latest_migrations_after")
BEFORE = [("reports", "0003_cluster_periods")]
AFTER = [("reports", "0006_kinds_cost_kind_unique")]


@pytest.mark.django_db(transaction=True)
def test_stored_rows_of_temporary_names_move_onto_their_version_summed():
    cluster = TritonCluster.objects.create(name="mig-prod")  # reverting reports keeps its table
    old = migrate_to(BEFORE)
    CostRollup = old.get_model("reports", "CostRollup")
    at = datetime(2026, 11, 2, 10, tzinfo=UTC)
    common = {"cluster_id": cluster.pk, "node_name": "n1", "period": "hour", "start": at}
    for name, version, ticks in (
        ("a", "1", 100),
        ("a--smoke-1-c1516e", "1", 10),
        ("a--smoke-1-0a9f3b", "1", 20),
        ("a--bench-8-c0ffee", "2", 40),
    ):
        CostRollup.objects.create(
            **common, kind="model", model_name=name, version=version, cost_ticks=ticks, minutes=1
        )
    CostRollup.objects.create(**common, kind="idle", cost_ticks=5, minutes=60)

    new = migrate_to(AFTER)
    rows = new.get_model("reports", "CostRollup").objects.filter(cluster_id=cluster.pk)
    got = set(
        rows.values_list("kind", "model_name", "version", "cost_kind", "cost_ticks", "minutes")
    )
    assert got == {
        ("model", "a", "1", "serving", 100, 1),
        ("model", "a", "1", "validation", 30, 2),
        ("model", "a", "2", "benchmark", 40, 1),
        ("idle", "", "", "", 5, 60),
    }
    # back: the validation and benchmark rows go, to be rebuilt
    back = migrate_to(BEFORE).get_model("reports", "CostRollup")
    rows = back.objects.filter(cluster_id=cluster.pk)
    assert set(rows.values_list("model_name", "cost_ticks")) == {("a", 100), ("", 5)}
    rows.delete()
    cluster.delete()
