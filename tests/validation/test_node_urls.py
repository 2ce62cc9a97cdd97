"""Node addresses are checked where they enter: usable by every consumer, unique per
cluster, and inside the allowed networks (SSRF guard)."""

import pytest
from rest_framework.test import APIClient

from deployments.models import TritonNode
from deployments.services import cluster_create
from integrations.targets import TargetError, check_host, host_port, http_base_url, parse_networks

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(make_user):
    rita = make_user("rita", role="release-managers")
    cluster_create(actor=rita, name="edge", environment="staging")
    client = APIClient()
    client.force_authenticate(rita)
    return client


def _add(api, **body):
    return api.post("/api/v1/clusters/edge/nodes/", {"name": "n1", **body}, format="json")


@pytest.mark.parametrize(
    "field, value",
    [
        ("http_url", "https://127.0.0.1"),  # no port: run_router refused it at start
        ("http_url", "127.0.0.1:8000"),
        ("http_url", "ftp://127.0.0.1:21"),
        ("http_url", "http://127.0.0.1:8000/v2"),
        ("http_url", "http://user:pw@127.0.0.1:8000"),
        ("grpc_url", "127.0.0.1"),
        ("grpc_url", "127.0.0.1:notaport"),
        ("metrics_url", "http://127.0.0.1/metrics"),
    ],
)
def test_unusable_node_addresses_are_refused_with_their_field(api, field, value):
    body = {"http_url": "http://127.0.0.1:8000", field: value}
    response = _add(api, **body)
    assert response.status_code == 400, response.content
    assert response.json()["errors"][0]["field"] == field
    assert not TritonNode.objects.exists()


def test_a_second_node_with_the_same_url_is_refused(api):
    assert _add(api, http_url="http://127.0.0.1:8000").status_code == 201
    again = api.post(
        "/api/v1/clusters/edge/nodes/",
        {"name": "n2", "http_url": "http://127.0.0.1:8000"},
        format="json",
    )
    assert again.status_code == 400
    assert again.json()["errors"][0]["field"] == "http_url"
    assert TritonNode.objects.count() == 1


def test_nodes_outside_the_allowed_networks_are_refused(api):
    """Test settings allow loopback only: the server never contacts another host."""
    for url in ("http://10.1.2.3:8000", "http://example.org:8000", "http://[::2]:8000"):
        response = _add(api, http_url=url)
        assert response.status_code == 400, url
        message = response.json()["errors"][0]["message"]
        assert "allowed networks" in message or "does not resolve" in message  # offline DNS
    ok = _add(api, http_url="http://localhost:8000", grpc_url="[::1]:8001")
    assert ok.status_code == 201, ok.content


def test_allow_list_rules():
    networks = parse_networks("10.0.0.0/8, ::1/128")
    check_host("10.9.9.9", networks)
    check_host("::1", networks)
    check_host("8.8.8.8", ())  # no allow-list: public addresses only
    check_host("2001:4860:4860::8888", ())
    inside = ["10.0.0.1", "127.0.0.1", "169.254.169.254", "0.0.0.0", "224.0.0.1", "240.0.0.1"]
    for host in [*inside, "::1", "fe80::1", "fc00::1", "::ffff:8.8.8.8", "localhost"]:
        with pytest.raises(TargetError):
            check_host(host, ())
    with pytest.raises(TargetError):  # IPv4-mapped IPv6 is not the IPv4 network
        check_host("::ffff:10.1.1.1", networks)
    with pytest.raises(TargetError):
        check_host("11.0.0.1", networks)
    with pytest.raises(TargetError):
        check_host("node.internal", networks)
    loopback = parse_networks("127.0.0.0/8")
    assert host_port("grpc://127.0.0.1:8001", loopback) == ("127.0.0.1", 8001)
    assert http_base_url("http://127.0.0.1:8000/", loopback) == "http://127.0.0.1:8000/"


def test_a_stored_node_outside_the_allowed_networks_is_never_contacted(api):
    """A row written before these checks (or straight to the database) is refused where the
    control plane connects; the other nodes of the cluster are still reported."""
    assert _add(api, http_url="http://127.0.0.1:9").status_code == 201
    TritonNode.objects.create(
        cluster=TritonNode.objects.get().cluster, name="old", http_url="http://10.1.2.3:8000"
    )
    status = api.get("/api/v1/clusters/edge/status/").json()
    by_name = {n["name"]: n for n in status["nodes"]}
    assert "allowed networks" in by_name["old"]["error"]
    assert by_name["n1"]["reachable"] is False and "allowed" not in by_name["n1"]["error"]


def test_an_nginx_cluster_takes_only_plain_http_nodes(api):
    """nginx proxies plain HTTP to its upstreams (run_router refused https:// at start)."""
    assert _add(api, http_url="https://127.0.0.1:8443").status_code == 201
    nginx = {"driver": "nginx", "listen": "127.0.0.1:9000"}
    refused = api.patch("/api/v1/clusters/edge/", {"router": nginx}, format="json")
    assert refused.status_code == 400
    assert refused.json()["errors"][0]["field"] == "router.driver"
    api.delete("/api/v1/clusters/edge/nodes/n1/")
    assert api.patch("/api/v1/clusters/edge/", {"router": nginx}, format="json").status_code == 200
    again = _add(api, http_url="https://127.0.0.1:8443")
    assert again.status_code == 400 and again.json()["errors"][0]["field"] == "http_url"


def test_telemetry_skips_a_stored_node_outside_the_allowed_networks(api):
    from telemetry.selectors import scrape_targets

    urls = {"http_url": "http://127.0.0.1:9", "metrics_url": "http://127.0.0.1:10/metrics"}
    assert _add(api, **urls).status_code == 201
    TritonNode.objects.create(
        cluster=TritonNode.objects.get().cluster,
        name="old",
        http_url="http://10.1.2.3:8000",
        metrics_url="http://10.1.2.3:8002/metrics",
    )
    assert [t.url for t in scrape_targets()] == ["http://127.0.0.1:10/metrics"]


@pytest.mark.parametrize("name", ["a/b", "../n", "n 1", "n1?x"])
def test_a_node_name_must_fit_in_its_url(api, name):
    """Its name is a path segment of the node's API URL: one with '/' could not be removed."""
    response = api.post(
        "/api/v1/clusters/edge/nodes/",
        {"name": name, "http_url": "http://127.0.0.1:8000"},
        format="json",
    )
    assert response.status_code == 400 and response.json()["errors"][0]["field"] == "name"
