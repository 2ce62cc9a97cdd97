"""The migration that adds month rows derives them from the day rows already stored."""

from datetime import UTC, datetime

import pytest

from deployments.models import TritonCluster
from tests.conftest import migrate_to

pytestmark = pytest.mark.usefixtures("latest_migrations_after")
BEFORE = [("reports", "0007_cost_output_tokens")]
AFTER = [("reports", "0008_month_cluster_period")]


@pytest.mark.django_db(transaction=True)
def test_months_are_summed_from_the_stored_days_and_go_when_reverted():
    cluster = TritonCluster.objects.create(name="mig-months")  # reverting reports keeps its table
    CostRollup = migrate_to(BEFORE).get_model("reports", "CostRollup")
    common = {"cluster_id": cluster.pk, "node_name": "", "period": "dc", "kind": "model"}
    for day, ticks, tokens in ((datetime(2026, 10, 31, tzinfo=UTC), 7, 1),
                               (datetime(2026, 11, 1, tzinfo=UTC), 100, 2),
                               (datetime(2026, 11, 30, tzinfo=UTC), 20, 3)):  # fmt: skip
        CostRollup.objects.create(**common, start=day, model_name="a", version="1",
                                  cost_ticks=ticks, requests=ticks, minutes=1440,
                                  output_tokens=tokens)  # fmt: skip
    CostRollup.objects.create(  # per node: not summed into a cluster's month
        **{**common, "node_name": "n1", "period": "day"}, start=datetime(2026, 11, 2, tzinfo=UTC),
        model_name="a", version="1", cost_ticks=1000, minutes=1440,
    )  # fmt: skip

    new = migrate_to(AFTER).get_model("reports", "CostRollup")
    months = new.objects.filter(cluster_id=cluster.pk, period="mc")
    assert set(
        months.values_list("start", "node_name", "model_name", "cost_ticks", "requests",
                           "minutes", "output_tokens")
    ) == {
        (datetime(2026, 10, 1, tzinfo=UTC), "", "a", 7, 7, 1440, 1),
        (datetime(2026, 11, 1, tzinfo=UTC), "", "a", 120, 120, 2880, 5),
    }  # fmt: skip
    back = migrate_to(BEFORE).get_model("reports", "CostRollup")
    rows = back.objects.filter(cluster_id=cluster.pk)
    assert not rows.filter(period="mc").exists() and rows.count() == 4
    rows.delete()
    cluster.delete()
