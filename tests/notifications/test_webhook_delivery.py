"""Deliveries to a real local HTTP receiver: each event once, signed, retried with backoff
after a failure, logged; the outbox scan is idempotent, also when run concurrently."""

import io
import threading
import time

import pytest
from django.db import connection
from rest_framework.test import APIClient

from audit.services import audit_record
from notifications.deliveries import delivery_attempt
from notifications.models import Delivery
from notifications.outbox import outbox_scan
from notifications.services import webhook_create
from notifications.tasks import scan_outbox
from tests.conftest import start_celery_worker
from tests.notifications.receiver import Receiver
from tests.registry.archives import example_entries, tar_gz

SECRET = "receiver-shared-secret-0123"
ALERT = {
    "kind": "silent_failure",
    "severity": "critical",
    "summary": "risk_score v2 answers 500 to every request while READY",
    "cluster": "prod",
    "node": "n1",
    "model": "risk_score",
    "version": 2,
}


def _fire(alert_id: int, **overrides):
    details = {**ALERT, "alert_id": alert_id, **overrides}
    return audit_record(actor=None, action="alert.fired", details=details)


def _deliver_all() -> list[int]:
    """What the beat and the worker do, in this process: scan, then attempt each due one."""
    due = outbox_scan()
    for delivery_id in due:
        delivery_attempt(delivery_id=delivery_id)
    return due


@pytest.mark.django_db
def test_each_event_reaches_the_receiver_once_with_a_valid_signature(make_user, settings, tmp_path):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    rita = make_user("rita", role="release-managers")
    ada = make_user("ada", role="algorithm")
    with Receiver() as receiver:
        every = ["alert.fired", "alert.resolved", "version.registered"]
        hook = webhook_create(actor=rita, url=receiver.url, secret=SECRET, events=every)
        _fire(101)
        audit_record(actor=None, action="alert.resolved", details={**ALERT, "alert_id": 101})
        audit_record(actor=None, action="alert.acknowledged", details={**ALERT, "alert_id": 101})
        api = APIClient()
        api.force_authenticate(ada)
        assert api.post("/api/v1/teams/", {"name": "fraud"}, format="json").status_code == 201
        model = {"name": "risk_score", "team": "fraud"}
        assert api.post("/api/v1/models/", model, format="json").status_code == 201
        archive = io.BytesIO(tar_gz(example_entries("risk_score", 1)))
        archive.name = "risk_score.tar.gz"
        uploaded = api.post(
            "/api/v1/models/risk_score/versions/", {"archive": archive}, format="multipart"
        )
        assert uploaded.status_code == 201, uploaded.content
        assert len(_deliver_all()) == 3
        assert _deliver_all() == [] and _deliver_all() == []  # scanned again: nothing new
        got = receiver.wait_for(3)
    assert [r.headers["x-switchyard-event"] for r in got] == every
    for request in got:
        assert request.is_signed_with(SECRET), request.headers
        assert not request.is_signed_with("another-secret-entirely")
        assert request.path == "/hooks/switchyard"
        document = request.document
        assert document["id"] == request.headers["x-switchyard-delivery"]
        assert document["event"] == request.headers["x-switchyard-event"]
    fired = got[0].document
    assert fired["severity"] == "critical" and fired["data"]["alert_id"] == 101
    assert {k: fired["data"][k] for k in ALERT} == ALERT
    registered = got[2].document
    assert registered["data"]["actor"] == "ada" and "risk_score" in registered["summary"]
    log = Delivery.objects.filter(webhook=hook)
    assert (
        sorted(log.values_list("status", "attempts", "response_code"))
        == [("delivered", 1, 200)] * 3
    )


@pytest.mark.django_db
def test_severity_and_event_filters_and_the_slack_format(make_user):
    rita = make_user("rita", role="release-managers")
    with Receiver() as slack, Receiver() as pager:
        webhook_create(
            actor=rita, url=slack.url, secret=SECRET, events=["alert.fired"], format="slack"
        )
        webhook_create(
            actor=rita,
            url=pager.url,
            secret=SECRET,
            events=["alert.fired"],
            min_severity="critical",
        )
        _fire(1, severity="warning", summary="queue time over the SLA")
        _fire(2, severity="critical")
        audit_record(actor=None, action="deployment.failed", details={"error": "n1: boom"})
        assert len(_deliver_all()) == 3
        to_slack, to_pager = slack.wait_for(2), pager.wait_for(1)
    assert [r.document for r in to_slack] == [
        {"text": "[warning] alert.fired: Alert fired: queue time over the SLA"},
        {"text": f"[critical] alert.fired: Alert fired: {ALERT['summary']}"},
    ]
    assert all(r.is_signed_with(SECRET) for r in to_slack)
    assert [r.document["data"]["alert_id"] for r in to_pager] == [2]


@pytest.mark.django_db
def test_a_4xx_answer_fails_at_once_and_a_url_no_longer_allowed_is_not_contacted(
    make_user, settings
):
    rita = make_user("rita", role="release-managers")
    with Receiver(statuses=[404]) as receiver:
        webhook_create(actor=rita, url=receiver.url, secret=SECRET, events=["alert.fired"])
        _fire(1)
        [delivery_id] = outbox_scan()
        assert delivery_attempt(delivery_id=delivery_id) is None  # no retry
        done = Delivery.objects.get(pk=delivery_id)
        assert (done.status, done.attempts, done.response_code) == ("failed", 1, 404)
        assert "HTTP 404" in done.last_error and "receiver says no" in done.last_error
        settings.SWITCHYARD_ALLOWED_TARGET_NETWORKS = "10.0.0.0/8"
        _fire(2)
        [second] = outbox_scan()
        assert delivery_attempt(delivery_id=second) is None
        refused = Delivery.objects.get(pk=second)
        assert refused.status == "failed" and "URL refused" in refused.last_error
        assert len(receiver.requests) == 1
    # A finished delivery is never attempted again.
    assert delivery_attempt(delivery_id=delivery_id) is None


@pytest.mark.django_db(transaction=True)
def test_concurrent_scans_record_and_queue_each_delivery_once(make_user):
    rita = make_user("rita", role="release-managers")
    hooks = [
        webhook_create(
            actor=rita, url=f"http://127.0.0.1:9/h{n}", secret=SECRET, events=["alert.fired"]
        )
        for n in range(3)
    ]
    for n in range(20):
        _fire(n)
    queued: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(4)

    def scan() -> None:
        try:
            start.wait(10)
            for _ in range(3):
                ids = outbox_scan()
                with lock:
                    queued.extend(ids)
        finally:
            connection.close()

    threads = [threading.Thread(target=scan) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    queued.extend(outbox_scan())
    assert Delivery.objects.count() == 20 * len(hooks)
    assert sorted(queued) == sorted(Delivery.objects.values_list("id", flat=True))


@pytest.fixture
def fast_retry_worker(transactional_db, tmp_path, monkeypatch):
    """A real Celery worker whose webhook backoff starts at 0.3 s."""
    monkeypatch.setenv("SWITCHYARD_WEBHOOK_RETRY_BASE_S", "0.3")
    handle = start_celery_worker(tmp_path / "worker.log")
    try:
        yield handle
    finally:
        handle.stop()


def test_a_failed_delivery_is_retried_by_the_worker_and_the_log_shows_it(
    fast_retry_worker, make_user
):
    rita = make_user("rita", role="release-managers")
    with Receiver(statuses=[500, 503]) as receiver:
        hook = webhook_create(actor=rita, url=receiver.url, secret=SECRET, events=["alert.fired"])
        _fire(7)
        scanned = scan_outbox.apply_async(queue=fast_retry_worker.queue, ignore_result=False)
        queued = scanned.get(timeout=30)
        scanned.forget()  # its result key goes now, not in an hour
        assert queued == 1
        got = receiver.wait_for(3)
        deadline = time.monotonic() + 30
        while Delivery.objects.get(webhook=hook).status != "delivered":
            assert time.monotonic() < deadline, "the delivery was never marked delivered"
            time.sleep(0.1)
        # Scanned again (as the beat does every 2 s): nothing is sent twice.
        again = scan_outbox.apply_async(queue=fast_retry_worker.queue, ignore_result=False)
        assert again.get(timeout=30) == 0
        again.forget()
        time.sleep(1.0)
        assert len(receiver.requests) == 3
    assert [r.status for r in got] == [500, 503, 200]
    assert len({r.headers["x-switchyard-delivery"] for r in got}) == 1
    assert all(r.is_signed_with(SECRET) for r in got)
    stamps = [int(r.headers["x-switchyard-timestamp"]) for r in got]
    assert stamps == sorted(stamps)  # each attempt signed when it was sent
    done = Delivery.objects.get(webhook=hook)
    assert (done.attempts, done.response_code) == (3, 200)
    assert done.last_error.startswith("HTTP 503")  # the last failed attempt's error
    api = APIClient()
    api.force_authenticate(rita)
    [row] = api.get(f"/api/v1/webhooks/{hook.pk}/deliveries/").json()
    assert (row["status"], row["attempts"], row["response_code"]) == ("delivered", 3, 200)
    assert row["last_error"].startswith("HTTP 503")


@pytest.mark.django_db
def test_the_log_keeps_finished_deliveries_for_its_retention_only(make_user, settings):
    from datetime import timedelta

    from django.utils import timezone

    from notifications.deliveries import deliveries_prune

    settings.SWITCHYARD_WEBHOOK_LOG_DAYS = 30
    rita = make_user("rita", role="release-managers")
    hook = webhook_create(
        actor=rita, url="http://127.0.0.1:9/h", secret=SECRET, events=["alert.fired"]
    )
    for n in range(6):
        _fire(n)
    ids = outbox_scan()
    old = timezone.now() - timedelta(days=31)
    states = ["delivered", "failed", "pending", "delivered", "failed", "sending"]
    for delivery_id, status, age in zip(ids, states, [old] * 3 + [timezone.now()] * 3, strict=True):
        Delivery.objects.filter(pk=delivery_id).update(status=status, created_at=age)
    assert deliveries_prune() == 2
    left = sorted(Delivery.objects.filter(webhook=hook).values_list("status", flat=True))
    assert left == ["delivered", "failed", "pending", "sending"]


@pytest.mark.django_db
def test_events_while_no_webhook_exists_are_never_sent_later(make_user):
    rita = make_user("rita", role="release-managers")
    _fire(1)
    assert outbox_scan() == []  # nobody to tell: the cursor moves past it
    hook = webhook_create(
        actor=rita, url="http://127.0.0.1:9/h", secret=SECRET, events=["alert.fired"]
    )
    assert outbox_scan() == []
    _fire(2)
    [delivery_id] = outbox_scan()
    assert Delivery.objects.get(pk=delivery_id, webhook=hook).payload["data"]["alert_id"] == 2


@pytest.mark.django_db
def test_an_attempt_that_never_finished_is_taken_up_again_and_counts(make_user, settings):
    from datetime import timedelta

    from django.utils import timezone

    settings.SWITCHYARD_WEBHOOK_MAX_ATTEMPTS = 3
    rita = make_user("rita", role="release-managers")
    with Receiver() as receiver:
        webhook_create(actor=rita, url=receiver.url, secret=SECRET, events=["alert.fired"])
        _fire(1)
        _fire(2)
        first, second = outbox_scan()
        # As a worker killed in the middle of its POST leaves them: claimed, long ago.
        long_ago = timezone.now() - timedelta(minutes=5)
        gone = {"status": "sending", "claimed_until": long_ago, "queued_at": long_ago}
        Delivery.objects.filter(pk=first).update(attempts=1, **gone)
        Delivery.objects.filter(pk=second).update(attempts=3, **gone)
        assert sorted(outbox_scan()) == [first, second]  # the scan queues both again
        assert delivery_attempt(delivery_id=first) is None
        assert delivery_attempt(delivery_id=second) is None
        assert len(receiver.wait_for(1)) == 1
    retried, ended = Delivery.objects.get(pk=first), Delivery.objects.get(pk=second)
    assert (retried.status, retried.attempts, retried.response_code) == ("delivered", 2, 200)
    assert (ended.status, ended.attempts) == ("failed", 3)
    assert ended.last_error == "The last attempt never finished."
    assert delivery_attempt(delivery_id=second) is None and len(receiver.requests) == 1
