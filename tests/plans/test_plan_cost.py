"""A plan's page shows each cluster's cost per 1k of baseline and candidate during its release
and the plan's delta across clusters, from the cost rollups (PostgreSQL)."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from plans.models import PlanRelease
from plans.services import plan_create
from releases.models import Release
from releases.services import release_create
from telemetry.models import Rollup
from tests.release_setup import release_world

pytestmark = pytest.mark.django_db


def test_the_plan_page_shows_the_candidates_cost_per_1k_against_the_baseline(
    make_user, settings, tmp_path, client
):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    world = release_world(make_user, node_hourly_cost=Decimal("6"))
    cluster, rita, v2 = world["cluster"], world["rita"], world["versions"][1]
    plan = plan_create(candidate=v2, waves=[{"clusters": ["prod"]}], actor=rita)
    # The plan's first tick would start this release; here it is recorded as that tick does.
    release = release_create(cluster=cluster, candidate=v2, actor=rita)
    PlanRelease.objects.filter(plan=plan).update(release=release)
    now = timezone.now().replace(second=0, microsecond=0)
    Release.objects.filter(pk=release.pk).update(created_at=now - timedelta(minutes=10))
    for ago in range(9, 0, -1):  # the candidate computes twice as long per request
        minute = now - timedelta(minutes=ago)
        Rollup.objects.create(cluster=cluster, node_name="n1", minute=minute)
        for version, compute in (("1", 10e6), ("2", 20e6)):
            Rollup.objects.create(
                cluster=cluster, node_name="n1", model_name="risk_score", version=version,
                minute=minute, requests=100, successes=100, compute_us=compute,
            )  # fmt: skip
    client.force_login(rita)
    page = client.get(f"/plans/{plan.pk}/").content.decode()
    card = page.split('data-testid="plan-cost"', 1)[1].split("</table>", 1)[0]
    assert "<td>prod</td>" in card and "0.1667" in card and "0.3333" in card
    assert '<span data-testid="plan-cost-delta">(+100.0 %)</span>' in card
