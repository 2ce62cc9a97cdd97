"""Server errors the fuzzer knows of that the validation part of issue 13 fixes.

TODO(issue 13, validation part): each test here is a strict xfail. Once typed validation
of a cluster's `router` JSON is merged, it passes, the strict xfail turns that into a
failure, and then the marker goes and the matching KNOWN_VALIDATION_GAPS entry in
test_api_fuzz.py is removed.
"""

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

UNVALIDATED_ROUTER = pytest.mark.xfail(
    strict=True, reason="issue 13 validation part: cluster router JSON is stored unvalidated"
)


@UNVALIDATED_ROUTER
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
