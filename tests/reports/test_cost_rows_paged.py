"""The Reports page's cost table is one page of the report's rows (costliest first), with
"first-last of N" and page links that keep the range and grouping."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from deployments.services import cluster_create
from reports.models import CostRollup, CostWatermark

pytestmark = pytest.mark.django_db


def test_the_cost_table_is_paged_costliest_first(client, make_user):
    max_ = make_user("max", role="managers")
    cluster = cluster_create(actor=max_, name="priced", environment="production")
    hour = timezone.now().replace(minute=0, second=0, microsecond=0)
    CostWatermark.objects.create(name="hourly", until=hour)
    CostRollup.objects.bulk_create(
        CostRollup(
            cluster=cluster,
            node_name="",
            period="hc",
            start=hour - timedelta(hours=1),
            kind="model",
            model_name=f"paid_{i:02d}",
            version="1",
            cost_ticks=(i + 1) * 10**9,
            requests=100,
            successes=100,
            compute_us=1e6,
            minutes=60,
        )
        for i in range(55)
    )
    client.force_login(max_)
    first = client.get("/reports/?range=24h&group_by=model").content.decode()
    count = re.search(r'data-testid="pager-count">([^<]*)<', first).group(1)
    table = first.split('data-testid="cost-table"')[1].split("</table>")[0]
    assert count == "1–50 of 55" and "paid_54" in table and "paid_04" not in table
    assert 'href="?range=24h&amp;chart=team&amp;group_by=model&amp;page=2"' in first
    second = client.get("/reports/?range=24h&group_by=model&page=2").content.decode()
    table = second.split('data-testid="cost-table"')[1].split("</table>")[0]
    assert "51–55 of 55" in second and "paid_04" in table and "paid_00" in table
