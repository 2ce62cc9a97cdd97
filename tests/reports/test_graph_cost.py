"""An ensemble's cost from telemetry rollups written directly: its own compute (which Triton
reports as its steps' again) is charged to nobody, and its Cost tab charges it each step's
cost for the share of the step's requests that came through it (reports/minutes.py
`_ensembles`, reports/selectors.py `graph_cost`). Triton's double count itself is measured
in docs/TRITON.md."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from deployments.models import TritonCluster, TritonNode
from models_registry.models import Model, ModelVersion, Team
from reports import selectors
from telemetry.models import Rollup

pytestmark = pytest.mark.django_db

PRICE = Decimal("60.0000")  # 1.00 a minute


def _version(model: Model, config: dict) -> ModelVersion:
    return ModelVersion.objects.create(
        model=model,
        version=1,
        label="v1",
        config_text="",
        config_json={"name": model.name, **config},
        manifest={},
        digest="0" * 64,
        size_bytes=0,
    )


@pytest.fixture
def pipeline():
    """Ten minutes of n1 ending a minute ago: `pipe` (an ensemble of `pre` then `score`)
    takes 100 requests a minute and Triton reports 30 s of compute for them, its steps'
    10 s + 20 s again; `pre` serves only the pipeline (100 requests, 10 s), `score` as many
    direct requests as through it (200 requests, 40 s)."""
    cluster = TritonCluster.objects.create(name="prod", environment="production")
    cluster.node_hourly_cost = PRICE
    cluster.save(update_fields=["node_hourly_cost"])
    TritonNode.objects.create(cluster=cluster, name="n1", http_url="http://127.0.0.1:1")
    team = Team.objects.create(name="fraud")
    models = {name: Model.objects.create(name=name, team=team) for name in ("pipe", "pre", "score")}
    steps = [{"model_name": "pre", "model_version": "-1"}, {"model_name": "score"}]
    _version(models["pipe"], {"platform": "ensemble", "ensemble_scheduling": {"step": steps}})
    for name in ("pre", "score"):
        _version(models[name], {"backend": "python"})
    start = timezone.now().replace(second=0, microsecond=0) - timedelta(minutes=11)
    rows = []
    for i in range(10):
        minute = start + timedelta(minutes=i)
        rows.append(Rollup(cluster=cluster, node_name="n1", minute=minute))
        for name, compute_s, requests in (("pipe", 30, 100), ("pre", 10, 100), ("score", 40, 200)):
            rows.append(
                Rollup(
                    cluster=cluster,
                    node_name="n1",
                    model_name=name,
                    version="1",
                    minute=minute,
                    requests=requests,
                    successes=requests,
                    compute_us=compute_s * 1e6,
                )
            )
    Rollup.objects.bulk_create(rows)
    return {"start": start, "pipe": models["pipe"]}


def test_an_ensembles_compute_is_its_steps_and_its_traffic_pays_their_share(
    pipeline, client, make_user
):
    since, until = pipeline["start"], pipeline["start"] + timedelta(minutes=10)
    report = selectors.cost_report(since=since, until=until, group_by="model")
    costs = {row["model"]: row["cost"] for row in report["rows"]}
    # 50 s of the node's 60 s a minute are the steps': 1/6 of each minute idle.
    assert costs == {"score": Decimal("6.67"), "pre": Decimal("1.67"), "pipe": Decimal("0.00")}
    # To the cent, rows and idle add up to the nodes' cost (largest remainders).
    assert report["idle_cost"] == Decimal("1.66") and report["total_cost"] == Decimal("10.00")

    graph = selectors.graph_cost(model=pipeline["pipe"], since=since, until=until)
    assert graph["steps"] == [
        {"model": "pre", "requests": 1000, "cost": Decimal("1.67"), "attributed": Decimal("1.67")},
        {
            "model": "score",
            "requests": 2000,
            "cost": Decimal("6.67"),
            "attributed": Decimal("3.33"),
        },
    ]
    assert (graph["own_cost"], graph["total_cost"], graph["requests"]) == (
        Decimal("0.00"),
        Decimal("5.00"),
        1000,
    )
    assert graph["cost_per_1k"] == Decimal("5.00")
    assert (
        selectors.graph_cost(model=Model.objects.get(name="pre"), since=since, until=until) is None
    )

    client.force_login(make_user("max", role="managers"))
    page = client.get("/models/pipe/cost/?range=24h").content.decode()
    card = page.split('data-testid="graph-cost"')[1].split("</table>")[0]
    assert "5.00 USD" in card and 'href="/models/score/cost/"' in card and "3.33" in card
    assert 'data-testid="graph-cost"' not in client.get("/models/pre/cost/").content.decode()
