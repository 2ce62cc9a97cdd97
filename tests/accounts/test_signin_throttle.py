"""Failed sign-ins are throttled per username and per client IP (API and console form).

Counters live in the shared Redis cache; each test uses its own client IP and usernames so
counters never leak from one test into another.
"""

import uuid

import pytest
from django.test import Client
from rest_framework.test import APIClient

from audit.models import AuditEvent

pytestmark = pytest.mark.django_db


@pytest.fixture
def ip() -> str:
    """A client address of this test alone."""
    n = uuid.uuid4().int
    return f"10.{n % 250}.{(n >> 8) % 250}.{(n >> 16) % 250 + 1}"


@pytest.fixture
def ada(make_user) -> str:
    """A user of this test alone (password pw-<name>)."""
    return make_user(f"ada-{uuid.uuid4().hex[:8]}").username


@pytest.fixture(autouse=True)
def limits(settings):
    settings.SWITCHYARD_SIGNIN_MAX_FAILURES_PER_USER = 3
    settings.SWITCHYARD_SIGNIN_MAX_FAILURES_PER_IP = 5
    settings.SWITCHYARD_SIGNIN_WINDOW_S = 300


def _api(ip: str, username: str, password: str):
    return APIClient(REMOTE_ADDR=ip).post(
        "/api/v1/auth/token/", {"username": username, "password": password}, format="json"
    )


def _form(ip: str, username: str, password: str):
    return Client(REMOTE_ADDR=ip).post("/login/", {"username": username, "password": password})


def test_the_token_endpoint_answers_429_after_too_many_failures_for_a_username(ada, ip):
    for _ in range(3):
        assert _api(ip, ada, "wrong").status_code == 401
    response = _api(ip, ada, f"pw-{ada}")  # even the right password, until the window ends
    assert response.status_code == 429
    assert 0 < int(response["Retry-After"]) <= 300
    message = response.json()["errors"][0]["message"]
    assert message.startswith("Too many failed sign-ins.")
    assert AuditEvent.objects.filter(action="auth.sign_in_failed").count() == 3
    failed = AuditEvent.objects.filter(action="auth.sign_in_failed").first()
    assert failed.details == {"username": ada, "ip": ip, "via": "api"}
    assert AuditEvent.objects.filter(action="auth.sign_in_throttled").count() == 1


def test_failures_from_one_ip_throttle_every_username_from_it(ada, ip):
    for n in range(5):
        assert _api(ip, f"nobody-{n}-{ada}", "wrong").status_code == 401
    assert _api(ip, ada, f"pw-{ada}").status_code == 429
    other_ip = ip.rsplit(".", 1)[0] + ".251"
    assert _api(other_ip, ada, f"pw-{ada}").status_code == 200


def test_successful_sign_ins_do_not_count(ada, ip):
    for _ in range(10):
        assert _api(ip, ada, f"pw-{ada}").status_code == 200
    assert not AuditEvent.objects.filter(action="auth.sign_in_failed").exists()


def test_the_login_form_answers_429_with_a_clear_message(ada, ip):
    for _ in range(3):
        response = _form(ip, ada, "wrong")
        assert response.status_code == 200 and b"password didn" in response.content
    response = _form(ip, ada, f"pw-{ada}")
    assert response.status_code == 429
    assert b"Too many failed sign-ins. Try again in" in response.content
    assert "_auth_user_id" not in response.wsgi_request.session  # not signed in
    assert 0 < int(response["Retry-After"]) <= 300
    events = AuditEvent.objects.filter(action="auth.sign_in_failed")
    assert [e.details["via"] for e in events] == ["console"] * 3


def test_the_form_and_the_api_share_the_counters(ada, ip):
    for _ in range(3):
        _form(ip, ada, "wrong")
    assert _api(ip, ada, f"pw-{ada}").status_code == 429


def test_the_login_form_still_signs_in(ada, ip):
    response = _form(ip, ada, f"pw-{ada}")
    assert response.status_code == 302


def test_the_token_endpoint_is_rate_limited_per_client(ada, ip, settings):
    rates = settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {**rates, "auth": "2/min"},
    }
    from rest_framework.settings import api_settings
    from rest_framework.throttling import SimpleRateThrottle

    SimpleRateThrottle.THROTTLE_RATES = api_settings.DEFAULT_THROTTLE_RATES
    try:
        assert _api(ip, ada, f"pw-{ada}").status_code == 200
        assert _api(ip, ada, f"pw-{ada}").status_code == 200
        response = _api(ip, ada, f"pw-{ada}")
        assert response.status_code == 429
        assert response.json()["errors"][0]["message"].startswith("Request was throttled")
        assert "Retry-After" in response
    finally:
        SimpleRateThrottle.THROTTLE_RATES = {**rates}


def test_behind_a_proxy_the_address_it_added_counts_not_the_clients_claim(ada, ip, settings):
    settings.SWITCHYARD_CLIENT_IP_HEADER = "HTTP_X_FORWARDED_FOR"
    client = APIClient(REMOTE_ADDR="127.0.0.1")
    for n in range(5):
        claimed = f"192.0.2.{n}, {ip}"  # a client-chosen first entry, then the proxy's
        body = {"username": f"x-{n}-{ada}", "password": "wrong"}
        response = client.post(
            "/api/v1/auth/token/", body, format="json", HTTP_X_FORWARDED_FOR=claimed
        )
        assert response.status_code == 401
    body = {"username": ada, "password": f"pw-{ada}"}
    blocked = client.post("/api/v1/auth/token/", body, format="json", HTTP_X_FORWARDED_FOR=ip)
    assert blocked.status_code == 429


def _fail_from(ip: str, times: int) -> None:
    for n in range(times):
        assert _api(ip, f"nobody-{n}-{uuid.uuid4().hex[:6]}", "wrong").status_code == 401


def test_an_ip_past_its_failures_is_refused_by_the_token_endpoint_before_parsing(ip):
    _fail_from(ip, 5)
    # Not even JSON: a parsed body would answer 400; the throttle answers first.
    response = APIClient(REMOTE_ADDR=ip).post(
        "/api/v1/auth/token/", b"{not json", content_type="application/json"
    )
    assert response.status_code == 429
    assert response.json()["errors"][0]["message"].startswith("Too many failed sign-ins.")


def test_admin_login_failures_count_and_a_throttled_ip_is_refused_before_parsing(ip, ada):
    admin = Client(REMOTE_ADDR=ip)
    for n in range(5):
        answer = admin.post("/admin/login/", {"username": f"x-{n}-{ada}", "password": "wrong"})
        assert answer.status_code == 200  # the form again
    failed = AuditEvent.objects.filter(action="auth.sign_in_failed", details__ip=ip)
    assert failed.count() == 5 and failed.first().details["via"] == "admin"
    # A malformed multipart body would be a 400 once parsed, a missing CSRF token a 403:
    # the throttle answers first.
    strict = Client(REMOTE_ADDR=ip, enforce_csrf_checks=True)
    response = strict.post(
        "/admin/login/", b"--x\r\nbroken", content_type="multipart/form-data; boundary=x"
    )
    assert response.status_code == 429
    assert int(response["Retry-After"]) > 0
    assert admin.get("/admin/login/").status_code == 200  # the page itself stays reachable


def test_x_forwarded_for_is_ignored_without_a_proxy_count(ip, settings):
    settings.SWITCHYARD_PROXY_COUNT = 0
    _fail_from_forwarded = [
        APIClient(REMOTE_ADDR=ip).post(
            "/api/v1/auth/token/",
            {"username": f"n-{n}-{uuid.uuid4().hex[:6]}", "password": "wrong"},
            format="json",
            HTTP_X_FORWARDED_FOR=f"192.0.2.{n + 1}",  # a different claim every time
        )
        for n in range(5)
    ]
    assert {r.status_code for r in _fail_from_forwarded} == {401}
    blocked = APIClient(REMOTE_ADDR=ip).post(
        "/api/v1/auth/token/", {"username": "u", "password": "p"}, format="json"
    )
    assert blocked.status_code == 429  # every failure counted against REMOTE_ADDR
    failed = AuditEvent.objects.filter(action="auth.sign_in_failed").first()
    assert failed.details["ip"] == ip


def test_with_a_proxy_count_the_address_that_many_hops_from_the_right_counts(settings):
    from django.test import RequestFactory

    from accounts.client_ip import client_ip

    request = RequestFactory().get(
        "/", REMOTE_ADDR="10.0.0.9", HTTP_X_FORWARDED_FOR="6.6.6.6, 203.0.113.7, 10.0.0.8"
    )
    settings.SWITCHYARD_PROXY_COUNT = 0
    assert client_ip(request) == "10.0.0.9"
    settings.SWITCHYARD_PROXY_COUNT = 1
    assert client_ip(request) == "10.0.0.8"
    settings.SWITCHYARD_PROXY_COUNT = 2
    assert client_ip(request) == "203.0.113.7"
    settings.SWITCHYARD_PROXY_COUNT = 9  # fewer hops than proxies: the leftmost one
    assert client_ip(request) == "6.6.6.6"
