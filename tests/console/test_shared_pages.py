"""Pages many users watch at once read their shared parts once per window for all of them
(core/shared.py), never once per view: the release managers' home, a live page's opening
history and a release's Cost card (issue #27: 50 users must not cost 50 computations)."""

import hashlib

import pytest
from django.core.cache import cache
from django.utils import timezone

from health.models import Alert
from releases.services import release_create
from tests.release_setup import release_world

pytestmark = pytest.mark.django_db

HOME_KEY = "console:home:releases"


def _opening_key(subject: str) -> str:
    return f"console:live-opening:{hashlib.sha256(subject.encode()).hexdigest()[:32]}"


@pytest.fixture
def world(make_user, settings, tmp_path):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    found = release_world(make_user)
    make_user("remy", role="release-managers")
    keys = [HOME_KEY, _opening_key("cluster:prod"), _opening_key("model:risk_score")]
    cache.delete_many(keys)
    yield found
    cache.delete_many(keys)


def _firing(summary: str) -> Alert:
    return Alert.objects.create(
        key=f"test:{summary}", kind=Alert.Kind.values[0], severity="critical",
        state=Alert.State.FIRING, cluster_name="prod", summary=summary,
    )  # fmt: skip


def test_release_managers_share_one_home_per_window(world, client, settings):
    settings.SWITCHYARD_PAGE_SHARE_S = 60
    client.login(username="rita", password="pw-rita")
    first = client.get("/?tab=releases").content.decode()
    assert 'data-testid="home-cluster"' in first and "prod" in first and "risk_score v1" in first
    computed = cache.get(HOME_KEY)["at"]
    _firing("disk almost full")
    client.login(username="remy", password="pw-remy")
    second = client.get("/?tab=releases").content.decode()
    assert cache.get(HOME_KEY)["at"] == computed  # remy read rita's reading
    assert "disk almost full" not in second and "No alert is firing." in second
    settings.SWITCHYARD_PAGE_SHARE_S = 0  # the window over: the next view reads afresh
    third = client.get("/?tab=releases").content.decode()
    assert cache.get(HOME_KEY)["at"] > computed
    assert "disk almost full" in third
    assert f'since <time datetime="{timezone.now():%Y-%m-%d}' in third  # a time, as before


def test_a_running_release_is_listed_from_the_shared_home(world, client, settings):
    settings.SWITCHYARD_PAGE_SHARE_S = 60
    release = release_create(cluster=world["cluster"], candidate=world["versions"][1],
                             actor=world["rita"])  # fmt: skip
    client.login(username="remy", password="pw-remy")
    page = client.get("/?tab=releases").content.decode()
    assert f'href="/releases/{release.pk}/"' in page and "risk_score v1 → v2" in page


LIVE_PAGES = [
    ("/clusters/prod/live/", "cluster:prod"),
    ("/models/risk_score/live/", "model:risk_score"),
]


@pytest.mark.parametrize(("path", "subject"), LIVE_PAGES)
def test_a_live_page_opens_with_one_shared_reading_per_window(
    world, client, settings, path, subject
):
    settings.SWITCHYARD_PAGE_SHARE_S = 60
    key = _opening_key(subject)
    client.login(username="rita", password="pw-rita")
    assert client.get(path).status_code == 200
    first = cache.get(key)
    assert first is not None and "initial" in first["value"]
    client.login(username="remy", password="pw-remy")
    assert client.get(path).status_code == 200
    assert cache.get(key)["at"] == first["at"]
    settings.SWITCHYARD_PAGE_SHARE_S = 0
    client.get(path)
    assert cache.get(key)["at"] > first["at"]


def test_watchers_of_a_release_share_its_cost_card(world, client, settings):
    settings.SWITCHYARD_HOME_CACHE_S = 60
    release = release_create(cluster=world["cluster"], candidate=world["versions"][1],
                             actor=world["rita"])  # fmt: skip
    key = f"reports:release-cost:{release.pk}:{release.phase}"
    cache.delete(key)
    try:
        client.login(username="rita", password="pw-rita")
        assert (
            'data-testid="release-cost"' in client.get(f"/releases/{release.pk}/").content.decode()
        )
        computed = cache.get(key)["at"]
        client.login(username="remy", password="pw-remy")
        assert (
            'data-testid="release-cost"' in client.get(f"/releases/{release.pk}/").content.decode()
        )
        assert cache.get(key)["at"] == computed
    finally:
        cache.delete(key)
