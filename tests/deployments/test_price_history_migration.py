"""The migration that starts the price history gives every existing node and cluster its
price of then, from the epoch on, so hours rolled up again keep the price they had."""

from decimal import Decimal

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("deployments", "0012_cluster_require_sla")]
AFTER = [("deployments", "0013_prices_price_history")]


@pytest.mark.django_db(transaction=True)
def test_existing_nodes_and_clusters_start_with_their_current_price_from_the_epoch():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    cluster_model = old.get_model("deployments", "TritonCluster")
    node_model = old.get_model("deployments", "TritonNode")
    cluster = cluster_model.objects.create(
        name="old", environment="staging", node_hourly_cost=Decimal("1.5")
    )
    node_model.objects.create(
        cluster=cluster, name="g1", http_url="http://127.0.0.1:9", gpu_hourly_cost=2, gpu_count=4
    )

    executor = MigrationExecutor(connection)
    executor.migrate(AFTER)
    new = executor.loader.project_state(AFTER).apps
    changes = new.get_model("deployments", "PriceChange").objects.order_by("node_name")
    found = [
        (c.node_name, c.effective_at.year, c.node_hourly_cost, c.gpu_hourly_cost, c.gpu_count)
        for c in changes
    ]
    assert found == [("", 1970, Decimal("1.5"), None, None), ("g1", 1970, None, Decimal(2), 4)]
    assert all(c.before == {} and c.changed_by_username == "" for c in changes)


@pytest.fixture(autouse=True)
def _back_to_the_latest_migrations():
    """Going back to deployments 0012 also unapplied the migrations that depend on it."""
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
