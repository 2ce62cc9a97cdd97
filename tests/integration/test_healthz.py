"""/healthz reports PostgreSQL, Redis and a Celery worker, and a stopped worker as unhealthy."""

import pytest

pytestmark = pytest.mark.django_db(transaction=True)


def test_healthz_is_ok_with_a_worker_and_unhealthy_once_it_stops(client, celery_worker):
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


def test_healthz_names_redis_when_it_cannot_be_reached(client, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    response = client.get("/healthz")
    assert response.status_code == 503
    checks = response.json()["checks"]
    assert checks["redis"]["is_ok"] is False
    assert "redis://127.0.0.1:1/0" in checks["redis"]["detail"]
    assert checks["worker"]["detail"].startswith("Cannot ask Celery workers")
