"""Console lists are paged like the API's and filtered with its filter names: "first-last of
N", page links that keep the filters, a bad filter named on the page (the API answers 400)."""

import re

import pytest

from tests.listing import Rows

pytestmark = pytest.mark.django_db


@pytest.fixture
def rows(settings, tmp_path, make_user, client):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    made = Rows(make_user("ada", role="algorithm"), make_user("rita", role="release-managers"))
    made.grow(55)
    client.force_login(made.rita)
    return made


def _page(client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, response.content[:300]
    return response.content.decode()


def _count(page: str) -> str:
    match = re.search(r'data-testid="pager-count">([^<]*)<', page)
    assert match, "no pager on the page"
    return match.group(1)


def _rows(page: str, testid: str) -> int:
    table = page.split(f'data-testid="{testid}"')[1].split("</table>")[0]
    return table.count("<tr") - 1  # the header row


def test_the_model_list_is_paged_and_its_links_keep_the_filters(client, rows):
    first = _page(client, "/models/?team=lists")
    assert _count(first) == "1–50 of 56" and _rows(first, "model-table") == 50
    assert 'href="?team=lists&amp;page=2"' in first
    second = _page(client, "/models/?team=lists&page=2")
    assert _count(second) == "51–56 of 56" and _rows(second, "model-table") == 6
    found = _page(client, "/models/?search=listed_5")  # listed_5 and listed_50..55
    assert _count(found) == "1–7 of 7"


def test_a_models_versions_are_paged(client, rows):
    first = _page(client, "/models/listed/")
    assert _count(first) == "1–50 of 56" and _rows(first, "versions-table") == 50
    last = _page(client, "/models/listed/?page=2")
    assert _count(last) == "51–56 of 56" and ">v1</a>" in last  # oldest last, like the API


def test_releases_filter_by_cluster_and_state_and_name_a_bad_filter(client, rows):
    prod = _page(client, "/releases/?cluster=list-prod")
    assert _count(prod) == "1–27 of 27"
    assert "list-stage" not in prod.split('data-testid="release-table"')[1].split("</table>")[0]
    pending = _page(client, "/releases/?state=PENDING&model=listed")
    assert (
        _count(pending) == "1–50 of 55"
        and 'href="?model=listed&amp;state=PENDING&amp;page=2"' in pending
    )
    bad = _page(client, "/releases/?state=done")
    assert 'data-testid="filter-error"' in bad and "state:" in bad
    assert _count(bad) == "1–50 of 55"  # listed without the bad filter


def test_deployments_and_benchmarks_have_paged_filtered_lists(client, rows):
    deployments = _page(client, "/deployments/?cluster=list-stage&model=listed")
    assert _count(deployments) == "1–28 of 28" and _rows(deployments, "deployment-table") == 28
    everything = _page(client, "/deployments/?page=2")
    assert _count(everything) == "51–55 of 55"
    runs = _page(client, "/benchmarks/?state=pending")
    assert _count(runs) == "1–50 of 55" and _rows(runs, "benchmark-table") == 50
    none = _page(client, "/benchmarks/?state=succeeded")
    assert _count(none) == "0 of 0" and "matches these filters" in none


def test_alerts_and_audit_show_n_of_total(client, rows):
    alerts = _page(client, "/alerts/?state=firing&model=listed")
    assert _count(alerts) == "1–50 of 55"
    assert 'href="?state=firing&amp;model=listed&amp;page=2"' in alerts
    audit = _page(client, "/audit/?action=model.created")
    assert _count(audit) == "1–50 of 56"
    assert 'href="/audit/export.csv?action=model.created"' in audit  # the CSV keeps them too
