"""A running web process rides through a restart of Redis (issue #18): Redis is SIGKILLed
and started again on its port under a live page in Chromium: its websocket reconnects and
the chart takes points again; meanwhile nothing answers 500 (the pages that need no Redis
are served, the sign-in and the ticket endpoint answer 503). The server is the test's own
(tests/faults/own_services.py; the machine's shared one is never touched), and daphne is
pointed at it. PostgreSQL's restart is tests/faults/test_restarts.py.
"""

from __future__ import annotations

import time
import uuid

import pytest

from accounts.services import api_token_create
from deployments.models import TritonCluster
from tests.browser.helpers import login
from tests.conftest import in_thread, serve_daphne
from tests.faults.test_restarts import (
    QUICK_HEALTH,
    _no_500_and_no_traceback,
    _outage_answer,
    own_redis,  # noqa: F401 - fixture
)

POINTS = "Number(document.getElementById('chart-rate').dataset.points || 0)"
BADGE = "[data-testid=ws-badge]"
# How a connect to a Redis that is not listening fails (redis-py, asyncio).
REFUSED = ("Error 111 connecting", "Connect call failed", "Connection refused")


def _publish_point(redis_url: str, cluster: str) -> None:
    """One live point of the cluster through the channel layer, as the collector sends it."""
    from asgiref.sync import async_to_sync
    from channels_redis.core import RedisChannelLayer

    from controlplane.settings.base import channel_layer_host
    from telemetry import events

    point = {
        "type": "point",
        "ts": time.time(),
        "cluster": cluster,
        "node": "",
        "model": "risk",
        "version": "1",
        "request_rate": 20.0,
        "success_rate": 100.0,
        "avg_ms": 3.0,
        "p99_ms": 7.0,
        "queue_ms": 0.1,
    }
    layer = RedisChannelLayer(hosts=[channel_layer_host(redis_url)], prefix="switchyard-test")

    async def send() -> None:
        try:
            await layer.group_send(events.cluster_group(cluster), events.batch([point]))
        finally:
            await layer.flush()

    async_to_sync(send)()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_redis_restart_under_a_live_page(own_redis, page, make_user, tmp_path):  # noqa: F811
    olga = make_user("olga", role="release-managers")
    _, secret = api_token_create(user=olga, name="restarts")
    cluster = f"east-{uuid.uuid4().hex[:6]}"
    TritonCluster.objects.create(name=cluster, environment="staging")
    log = tmp_path / "daphne.log"
    server = serve_daphne(log, SWITCHYARD_TEST_REDIS_URL=own_redis.url, **QUICK_HEALTH)
    base = f"http://{next(server)}"
    try:
        login(page, base, "olga")
        page.goto(f"{base}/clusters/{cluster}/live/")
        page.wait_for_selector(f"{BADGE}:has-text('live')", timeout=10000)
        in_thread(_publish_point, own_redis.url, cluster)
        page.wait_for_function(f"{POINTS} >= 1", timeout=10000)

        own_redis.kill()
        page.wait_for_selector(f"{BADGE}:has-text('reconnecting')", timeout=10000)
        # Pages that need no Redis are served; what needs it answers 503, never 500.
        for path in ("/", "/clusters/", f"/clusters/{cluster}/live/", "/api/v1/clusters/"):
            assert page.request.get(f"{base}{path}").status == 200, path
        assert page.request.get(f"{base}/healthz").status == 503  # says Redis is down
        ticket = page.request.post(
            f"{base}/api/v1/auth/ws-ticket/", headers={"Authorization": f"Token {secret}"}
        )
        _outage_answer(ticket, "json")  # its throttle counts in Redis
        csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
        form = {"username": "olga", "password": "pw-olga", "csrfmiddlewaretoken": csrf}
        signing_in = page.request.post(f"{base}/login/", form=form, max_redirects=0)
        _outage_answer(signing_in, "html")  # failed sign-ins are counted in Redis

        back = log.stat().st_size
        own_redis.start()  # empty: the page's socket must join its group again
        page.wait_for_selector(f"{BADGE}:has-text('live')", timeout=20000)
        drawn = page.evaluate(POINTS)
        in_thread(_publish_point, own_redis.url, cluster)
        page.wait_for_function(f"{POINTS} > {drawn}", timeout=10000)  # the chart resumes
        assert page.request.post(
            f"{base}/api/v1/auth/ws-ticket/", headers={"Authorization": f"Token {secret}"}
        ).ok
    finally:
        server.close()
    # Once Redis was back, no socket or request met a connection the restart had dropped. A
    # reconnect already under way while it was down may still log its refused connect after
    # the mark: a refusal is Redis not listening yet, a dropped connection is something else.
    after = log.read_bytes()[back:].decode(errors="replace").splitlines()
    dropped = [
        line
        for line in after
        if "unavailable" in line and not any(mark in line for mark in REFUSED)
    ]
    assert not dropped, after
    _no_500_and_no_traceback(log)
