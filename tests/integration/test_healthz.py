"""/healthz reports PostgreSQL, Redis and a Celery worker on every lane, and a stopped worker
or a lane nobody serves as unhealthy."""

import uuid

import pytest

from controlplane.queues import RELEASES, lane_queue
from tests.conftest import drop_queues, start_celery_worker

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def base_queue():
    """A base queue of this test's own, made the app's default (what /healthz checks)."""
    from controlplane.celery import app

    queue = f"health-{uuid.uuid4().hex[:10]}"
    before, app.conf.task_default_queue = app.conf.task_default_queue, queue
    try:
        yield queue
    finally:
        app.conf.task_default_queue = before
        drop_queues(queue)


def test_healthz_is_ok_with_a_worker_and_unhealthy_once_it_stops(
    client, base_queue, tmp_path, make_user
):
    worker = start_celery_worker(tmp_path / "worker.log", base_queue)  # every lane
    try:
        client.force_login(make_user("hana"))
        response = client.get("/healthz")
        assert response.status_code == 200, response.json()
        body = response.json()
        assert body["status"] == "ok"
        assert body["checks"]["database"]["is_ok"] is True
        assert body["checks"]["redis"]["is_ok"] is True
        detail = body["checks"]["worker"]["detail"]
        for lane in ("releases", "fleet", "long"):
            assert f"{lane} lane: {worker.hostname}" in detail
    finally:
        worker.stop()

    response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unhealthy"
    assert body["checks"]["worker"]["is_ok"] is False
    # No worker at all answered, or only others' (a parallel test's, on queues of their own).
    detail = body["checks"]["worker"]["detail"]
    assert detail.startswith("No Celery worker answered") or detail.endswith(
        "releases lane: none; fleet lane: none; long lane: none"
    ), detail
    assert body["checks"]["database"]["is_ok"] is True


def test_a_lane_nobody_serves_is_unhealthy_and_named(client, base_queue, tmp_path, make_user):
    only = [lane_queue(base_queue, RELEASES)]
    worker = start_celery_worker(tmp_path / "worker.log", base_queue, lanes=only)
    try:
        client.force_login(make_user("hana"))
        response = client.get("/healthz")
    finally:
        worker.stop()
    assert response.status_code == 503
    check = response.json()["checks"]["worker"]
    assert check["is_ok"] is False
    assert f"fleet ({base_queue}), long ({base_queue}.long) lane" in check["detail"]
    assert f"releases lane: {worker.hostname}" in check["detail"]


def test_healthz_names_redis_when_it_cannot_be_reached(client, settings, make_user):
    client.force_login(make_user("hana"))
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    response = client.get("/healthz")
    assert response.status_code == 503
    checks = response.json()["checks"]
    assert checks["redis"]["is_ok"] is False
    assert checks["redis"]["detail"] == "Redis is not reachable (ConnectionError)"
    assert b"redis://" not in response.content  # the URL may hold a password: names only
    assert checks["worker"]["detail"].startswith("Cannot ask Celery workers")
    card = client.get("/").content.decode()  # the console's health card, any role
    assert "Redis is not reachable" in card and "redis://" not in card


def test_anonymous_callers_get_the_status_only(client, settings, make_user):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    response = client.get("/healthz")
    assert response.status_code == 503
    assert set(response.json()) == {"status", "checked_at"}  # no driver error or worker name
    assert response.json()["status"] == "unhealthy"
    assert b"redis://" not in response.content

    client.force_login(make_user("hana"))
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["checks"]["redis"]["is_ok"] is False


def test_a_script_with_an_api_token_gets_the_details(client, settings, make_user):
    from accounts.services import api_token_create

    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    _, secret = api_token_create(user=make_user("hana"), name="probe")
    response = client.get("/healthz", HTTP_AUTHORIZATION=f"Token {secret}")
    assert response.json()["checks"]["redis"]["is_ok"] is False
    bad = client.get("/healthz", HTTP_AUTHORIZATION="Token sy_not-a-token")
    assert set(bad.json()) == {"status", "checked_at"}


def test_anonymous_healthz_answers_from_the_cached_check_within_its_window(
    client, settings, make_user
):
    settings.SWITCHYARD_HEALTH_CACHE_S = 0  # this call checks afresh, whatever ran before
    first = client.get("/healthz").json()
    settings.SWITCHYARD_HEALTH_CACHE_S = 60
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # a new check would find Redis down
    again = client.get("/healthz").json()
    assert again == first  # the same check: Redis, the database and the broker not asked
    client.force_login(make_user("hana"))
    cached = client.get("/healthz").json()
    assert cached["checked_at"] == first["checked_at"] and cached["checks"]["redis"]["is_ok"]
    settings.SWITCHYARD_HEALTH_CACHE_S = 0
    fresh = client.get("/healthz").json()
    assert fresh["checked_at"] != first["checked_at"]
    assert fresh["checks"]["redis"]["is_ok"] is False
