"""The managers' home reads the month's cost overview computed once per window for every user
who reads the same models (console/home.py through core/shared.py), never once per view."""

import hashlib

import pytest
from django.core.cache import cache

pytestmark = pytest.mark.django_db

ALL_MODELS_KEY = f"console:home:month:{hashlib.sha256(b'all').hexdigest()[:32]}"


def test_managers_share_one_month_overview_per_window(client, make_user, settings):
    cache.delete(ALL_MODELS_KEY)
    settings.SWITCHYARD_HOME_CACHE_S = 60
    try:
        make_user("max", role="managers")
        make_user("mia", role="managers")
        client.login(username="max", password="pw-max")
        first = client.get("/?tab=costs").content.decode()
        assert 'data-testid="month-cost"' in first and "This month so far (since" in first
        computed = cache.get(ALL_MODELS_KEY)["at"]
        client.login(username="mia", password="pw-mia")
        second = client.get("/?tab=costs").content.decode()
        assert cache.get(ALL_MODELS_KEY)["at"] == computed  # mia read max's overview
        assert 'data-testid="month-cost"' in second
        settings.SWITCHYARD_HOME_CACHE_S = 0  # stale at once: the next view computes it again
        client.get("/?tab=costs")
        assert cache.get(ALL_MODELS_KEY)["at"] > computed
    finally:
        cache.delete(ALL_MODELS_KEY)
