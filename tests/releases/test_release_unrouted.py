"""Unrouted traffic: real Triton nodes, a real nginx router with a gRPC listener, the real
collector's scrapes and rollups. Clients that call a node directly or speak gRPC are not
protected by a release; the share they make up is measured before the start (a start above
`analysis.max_unrouted_share` is refused until confirmed) and in every analysis interval."""

import asyncio
import json
import time
import uuid
from http.client import HTTPConnection
from urllib.parse import urlsplit

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from audit.models import AuditEvent
from deployments.executor import deployment_run
from deployments.services import deployment_create
from integrations.routers.access_log import last_lines, router_counts
from models_registry.services import model_create
from releases import routing
from releases.models import Release, ReleaseEvent
from releases.routing import access_log_path
from releases.services import release_action
from telemetry.collector import Collector, ScrapeSource
from telemetry.selectors import scrape_targets
from telemetry.services import rollups_write
from tests.conftest import wait_for
from tests.deploying import pushed
from tests.registry.archives import register_risk_score_as
from tests.releases.test_release_flow import routed_cluster
from tests.ticking import Ticking

pytestmark = [pytest.mark.triton, pytest.mark.django_db(transaction=True)]

FEATURES = np.linspace(-1.0, 1.0, 128, dtype=np.float32).reshape(1, 128)
FEATURE_INPUT = {"name": "FEATURES", "datatype": "FP32", "shape": [1, 128]}
BODY = json.dumps({"inputs": [{**FEATURE_INPUT, "data": FEATURES.ravel().tolist()}]})


@pytest.fixture
def world(triton_cluster, lanes, settings, tmp_path, make_user):
    for world in routed_cluster(
        triton_cluster, settings, tmp_path, make_user, name="unrouted", grpc=True
    ):
        settings.SWITCHYARD_STORAGE_ROOT = lanes.storage  # where the lanes' workers read
        rita, ada, cluster = world["rita"], world["ada"], world["cluster"]
        name = f"rel_unrouted_{uuid.uuid4().hex[:6]}"
        model = model_create(name=name, team="fraud", actor=ada, sla={"p99_latency_ms": 500})
        baseline = register_risk_score_as(model, ada, 1)
        candidate = register_risk_score_as(model, ada, 2)
        deployment = deployment_create(cluster=cluster, version=baseline, actor=rita)
        pushed(deployment)
        routing.router_for(cluster).apply(routing.router_state(cluster, []))
        api = world["api"] = APIClient()
        api.force_authenticate(rita)
        world.update(model=name, candidate=candidate, http_port=world["port"])
        try:
            yield world
        finally:
            unload = deployment_create(cluster=cluster, version=None, model=model, actor=rita)
            deployment_run(deployment_id=unload.pk)


def http_infer(base_url: str, model: str, n: int) -> list[str]:
    """`n` unversioned HTTP inferences to a base URL (a node or the router): their versions."""
    parts = urlsplit(base_url)
    conn = HTTPConnection(parts.hostname, parts.port, timeout=30)
    versions = []
    try:
        for _ in range(n):
            headers = {"Content-Type": "application/json"}
            conn.request("POST", f"/v2/models/{model}/infer", BODY, headers)
            response = conn.getresponse()
            assert response.status == 200
            versions.append(json.loads(response.read())["model_version"])
    finally:
        conn.close()
    return versions


def grpc_infer(address: str, model: str, n: int) -> None:
    client = grpcclient.InferenceServerClient(address)
    try:
        for _ in range(n):
            features = grpcclient.InferInput("FEATURES", [1, 128], "FP32")
            features.set_data_from_numpy(FEATURES)
            client.infer(model, [features], client_timeout=30)
    finally:
        client.close()


def _minute(ts: float) -> int:
    return int(ts // 60)


def collected(send, attempts: int = 3) -> None:
    """The real collector around `send()`: a scrape, the traffic, a scrape, the minute stored.
    Rollups put a scrape interval's deltas in the minute it ended in, while the router logs
    each request in its own minute: traffic that straddled a minute's end would be counted by
    Triton in one minute and by the router in two. Such a measurement is seen after the fact
    and not stored; it is taken again from the next minute on (the router's lines of a minute
    with no rollup are never counted), so the outcome never depends on when the test runs."""
    seen = []
    for _ in range(attempts):
        collector = Collector([ScrapeSource(scrape_targets())])
        began = time.time()
        asyncio.run(collector.tick(began))
        send()
        ended = time.time()
        asyncio.run(collector.tick(ended))
        rows = asyncio.run(collector.flush(None))
        if _minute(began) == _minute(ended):
            rollups_write(rows=rows)
            return
        seen.append((began, ended))
        wait_for(
            lambda end=ended: _minute(time.time()) > _minute(end),
            timeout_s=90,
            what="the next minute",
        )
    raise AssertionError(f"every measurement straddled a minute's end: {seen}")


def ticked_until(loop: Ticking, release, done, what: str, between=None) -> Release:
    """The stored release once `done(release)` holds, the lanes' workers ticking it; `between`
    runs between looks (traffic the next ticks observe)."""

    def check():
        loop.lanes.alive()
        stored = Release.objects.get(pk=release.pk)
        if done(stored):
            return stored
        if between is not None:
            between()
        return None

    try:
        return wait_for(check, timeout_s=120, what=what)
    except RuntimeError:
        stored = Release.objects.get(pk=release.pk)
        raise AssertionError(
            f"{what}: not after {loop.ticks()} ticks: {stored.phase} {stored.reason}"
        ) from None


def test_direct_and_grpc_clients_refuse_a_start_until_confirmed_and_show_in_every_interval(
    world, lanes
):
    model, nodes = world["model"], world["nodes"]
    router_url, grpc_router = (
        f"http://127.0.0.1:{world['http_port']}",
        f"127.0.0.1:{world['grpc_port']}",
    )

    def before_start():
        began = time.time()
        http_infer(router_url, model, 20)  # through the split a release would apply
        http_infer(nodes[0].http_url, model, 24)  # straight to a node
        grpc_infer(grpc_router, model, 16)  # through the router, but gRPC: passed through
        # nginx writes a request's line once it ended: the last may lag its answer a moment.
        log = access_log_path(world["cluster"])
        wait_for(
            lambda: (
                router_counts(last_lines(log, 1 << 20)[0], lambda ts: ts >= began - 1).split.get(
                    model, 0
                )
                >= 20
            ),
            timeout_s=30,
            what="the router's log of the 20 split requests",
        )

    collected(before_start)

    page = Client()
    page.force_login(world["rita"])
    cluster_page = page.get(reverse("console:cluster-detail", args=[world["cluster"].name]))
    html = cluster_page.content.decode()
    assert 'data-testid="cluster-unrouted"' in html
    assert ">66.7%<" in html  # 40 of the 60 requests Triton counted went around the split

    # The console's form says the same as the API (and starts nothing).
    form = {
        "cluster_id": world["cluster"].pk,
        "version_id": world["candidate"].pk,
        "steps": "50,100",
        "step_interval_s": "2",
    }
    refused_page = page.post(reverse("console:release-start"), form, follow=True)
    assert "66.7% of 60 requests (40)" in refused_page.content.decode()
    assert 'data-testid="confirm-unrouted"' in refused_page.content.decode()
    wrong = page.post(
        reverse("console:release-start"), {**form, "max_unrouted_pct": "500"}, follow=True
    )
    assert "between 0 and 100 %" in wrong.content.decode()
    assert not Release.objects.exists()

    body = {
        "cluster": world["cluster"].name,
        "model": model,
        "candidate_version": 2,
        "steps": [50, 100],
        "step_interval_s": 2,
        "analysis": {"min_requests": 10, "max_failed_checks": 3, "latency_tolerance": 10},
        "progress_deadline_s": 120,
    }
    refused = world["api"].post("/api/v1/releases/", body, format="json")
    assert refused.status_code == 409, refused.content
    error = refused.json()["errors"][0]
    assert error["field"] == "confirm_unrouted"
    assert "66.7% of 60 requests (40)" in error["message"]
    assert "gRPC clients" in error["message"] and "calling a node directly" in error["message"]
    assert "max_unrouted_share (5%)" in error["message"]
    assert not Release.objects.exists()

    started = world["api"].post(
        "/api/v1/releases/", {**body, "confirm_unrouted": True}, format="json"
    )
    assert started.status_code == 201, started.content
    at_start = started.json()["unrouted"]["at_start"]
    assert at_start["share"] == pytest.approx(40 / 60)
    assert (at_start["triton_requests"], at_start["split_requests"]) == (60, 20)
    assert at_start["confirmed"] and at_start["confirmed_by"] == "rita"
    assert at_start["grpc_via_router"] == 16
    release = Release.objects.get(pk=started.json()["id"])
    confirmed = ReleaseEvent.objects.get(release=release, kind="unrouted")
    assert confirmed.actor == "rita" and "66.7%" in confirmed.message
    audit = AuditEvent.objects.get(action="release.created")
    assert audit.details["unrouted"]["confirmed"] is True

    with Ticking(lanes) as loop:
        _during_the_release(world, loop, release, page)


def _during_the_release(world, loop, release, page) -> None:
    """Half the traffic through the split, half straight to the nodes: every interval
    measures the unrouted share; then a rollback."""
    model, nodes = world["model"], world["nodes"]
    router_url = f"http://127.0.0.1:{world['http_port']}"
    release = ticked_until(loop, release, lambda r: r.phase == "PROGRESSING", "PROGRESSING")
    direct = []

    def traffic():
        http_infer(router_url, model, 6)
        direct.extend(http_infer(nodes[1].http_url, model, 6))

    def measured(r):
        return (r.last_analysis.get("unrouted") or {}).get("share")

    release = ticked_until(loop, release, measured, "an interval's unrouted share", traffic)
    latest = release.last_analysis["unrouted"]
    assert 0.3 <= latest["share"] <= 0.7, latest
    assert latest["triton_requests"] >= 10
    # Unversioned direct calls get Triton's highest READY version: the candidate, at any step.
    assert set(direct) == {"2"}

    detail = world["api"].get(f"/api/v1/releases/{release.pk}/").json()
    assert detail["unrouted"]["latest"]["share"] == pytest.approx(latest["share"])
    assert detail["analyses"][-1]["unrouted"]["share"] is not None
    cockpit = page.get(reverse("console:release-detail", args=[release.pk])).content.decode()
    assert 'data-testid="release-unrouted"' in cockpit
    assert latest["share_percent"] in cockpit
    assert "started above the limit, confirmed by rita" in cockpit

    release_action(release=release, action="rollback", actor=world["rita"], reason="test over")
    ticked_until(loop, release, lambda r: r.phase in ("ROLLED_BACK", "FAILED"), "rolled back")


def test_a_model_whose_clients_all_use_the_split_starts_without_confirmation(world):
    model = world["model"]
    collected(lambda: http_infer(f"http://127.0.0.1:{world['http_port']}", model, 60))
    body = {
        "cluster": world["cluster"].name,
        "model": model,
        "candidate_version": 2,
        "steps": [100],
        "analysis": {"min_requests": 10},
        "dry_run": True,
    }
    planned = world["api"].post("/api/v1/releases/", body, format="json")
    assert planned.status_code == 200, planned.content
    at_start = planned.json()["unrouted_at_start"]
    assert at_start["share"] == 0.0 and at_start["split_requests"] == 60
    assert not at_start["over"] and not at_start["confirmed"]
