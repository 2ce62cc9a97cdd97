"""/healthz reports PostgreSQL, Redis and a Celery worker, and a stopped worker as unhealthy."""

import pytest

pytestmark = pytest.mark.django_db(transaction=True)


def test_healthz_is_ok_with_a_worker_and_unhealthy_once_it_stops(client, celery_worker, make_user):
    client.force_login(make_user("hana"))
    response = client.get("/healthz")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["status"] == "ok"
    assert body["checks"]["database"]["is_ok"] is True
    assert body["checks"]["redis"]["is_ok"] is True
    assert celery_worker.hostname in body["checks"]["worker"]["detail"]

    celery_worker.stop()

    response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unhealthy"
    assert body["checks"]["worker"]["is_ok"] is False
    assert "No Celery worker answered" in body["checks"]["worker"]["detail"]
    assert body["checks"]["database"]["is_ok"] is True


def test_healthz_names_redis_when_it_cannot_be_reached(client, settings, make_user):
    client.force_login(make_user("hana"))
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    response = client.get("/healthz")
    assert response.status_code == 503
    checks = response.json()["checks"]
    assert checks["redis"]["is_ok"] is False
    assert "redis://127.0.0.1:1/0" in checks["redis"]["detail"]
    assert checks["worker"]["detail"].startswith("Cannot ask Celery workers")


def test_anonymous_callers_get_the_status_only(client, settings, make_user):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json() == {"status": "unhealthy"}  # no URL, driver error or worker name
    assert b"redis://" not in response.content

    client.force_login(make_user("hana"))
    response = client.get("/healthz")
    assert response.status_code == 503
    assert "redis://127.0.0.1:1/0" in response.json()["checks"]["redis"]["detail"]


def test_a_script_with_an_api_token_gets_the_details(client, settings, make_user):
    from accounts.services import api_token_create

    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    _, secret = api_token_create(user=make_user("hana"), name="probe")
    response = client.get("/healthz", HTTP_AUTHORIZATION=f"Token {secret}")
    assert response.json()["checks"]["redis"]["is_ok"] is False
    bad = client.get("/healthz", HTTP_AUTHORIZATION="Token sy_not-a-token")
    assert bad.json() == {"status": "unhealthy"}
