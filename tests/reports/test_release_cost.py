"""The release page's Cost card: cost per 1k requests of baseline and candidate."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from console.report_views import release_cost_context
from releases.models import Release
from releases.services import release_create
from telemetry.models import Rollup
from tests.release_setup import release_world

pytestmark = pytest.mark.django_db


@pytest.fixture
def release(settings, tmp_path, make_user):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    world = release_world(make_user, node_hourly_cost=Decimal("6"))
    cluster, rita, v2 = world["cluster"], world["rita"], world["versions"][1]
    found = release_create(cluster=cluster, candidate=v2, actor=rita)
    now = timezone.now().replace(second=0, microsecond=0)
    Release.objects.filter(pk=found.pk).update(
        created_at=now - timedelta(minutes=10),
        finished_at=now - timedelta(minutes=4),
        phase="SUCCEEDED",
    )
    for ago in range(9, 0, -1):  # the candidate computes twice as long per request
        minute = now - timedelta(minutes=ago)
        Rollup.objects.create(cluster=cluster, node_name="n1", minute=minute)
        for version, compute in (("1", 10e6), ("2", 20e6)):
            Rollup.objects.create(
                cluster=cluster, node_name="n1", model_name="risk_score", version=version,
                minute=minute, requests=100, successes=100, compute_us=compute,
            )  # fmt: skip
    return Release.objects.get(pk=found.pk), rita


def test_release_page_shows_cost_per_1k_of_baseline_and_candidate_during_and_after(release, client):
    found, rita = release
    during, after = release_cost_context(found)["release_cost"]
    assert during["label"] == "During the release" and after["label"] == "Since promotion"
    for row in (during, after):
        # As the card prints them (the shared cache holds the amounts as text).
        assert row["baseline"]["cost_per_1k"] == "0.1667"  # 0.1/min x 1/6 / 100 x 1000
        assert row["candidate"]["cost_per_1k"] == "0.3333"
    assert during["baseline"]["successes"] == 500 and after["baseline"]["successes"] == 400
    client.force_login(rita)
    page = client.get(f"/releases/{found.pk}/").content.decode()
    assert 'data-testid="release-cost"' in page and "0.3333" in page
