"""A cluster's router settings are typed where they enter, so the fuzzer's values never
break the router view (they used to: KeyError, AttributeError or RouterError, a 500)."""

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "router",
    [
        {"driver": "nginx"},  # no listen: KeyError
        {"driver": "nginx", "listen": 5},  # not a string: AttributeError
        {"driver": "nginx", "listen": "10.0.0.1:80"},  # not loopback: RouterError
    ],
)
def test_a_router_setting_never_breaks_the_router_view(make_user, router):
    from deployments.models import TritonCluster

    TritonCluster.objects.create(name="gap", environment="production")
    client = Client(raise_request_exception=False)
    client.force_login(make_user("rita", role="release-managers"))

    patched = client.patch("/api/v1/clusters/gap/", {"router": router}, "application/json")
    view = client.get("/api/v1/clusters/gap/router/")

    assert patched.status_code == 400 or view.status_code == 200
    assert view.status_code < 500
