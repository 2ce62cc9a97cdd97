"""The console's interactive API reference (Swagger UI) in Chromium: every file it loads
comes from this server, it lists the schema's operations, and "Try it out" calls the API
with the signed-in user's session."""

import json
from urllib.parse import urlsplit

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _sign_in(page, base: str, username: str) -> None:
    page.goto(f"{base}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", f"pw-{username}")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")


def test_the_api_reference_renders_every_operation_from_local_files_only(
    live_server, page, make_user
):
    make_user("rita", role="release-managers")
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))

    _sign_in(page, live_server.url, "rita")
    page.click("[data-testid=api-docs-link]")
    page.wait_for_url(f"{live_server.url}/api/docs/")
    page.wait_for_selector(".opblock-summary-path", timeout=30000)

    shown = {
        (m.strip().upper(), p.strip().replace("\u200b", ""))
        for m, p in zip(
            page.locator(".opblock-summary-method").all_inner_texts(),
            page.locator(".opblock-summary-path").all_inner_texts(),
            strict=True,
        )
    }
    schema = json.loads(page.request.get(f"{live_server.url}/api/schema/?format=json").text())
    documented = {
        (method.upper(), path)
        for path, operations in schema["paths"].items()
        for method in operations
        if method in {"get", "post", "put", "patch", "delete"}
    }
    assert len(documented) > 40
    assert shown == documented
    assert "Switchyard API" in page.inner_text(".info .title")

    # Try it out: GET /api/v1/auth/me/ answers the signed-in user through the page.
    me = page.locator(".opblock-get", has_text="/api/v1/auth/me/")
    me.locator(".opblock-summary").click()
    me.locator("button.try-out__btn").click()
    me.locator("button.execute").click()
    answer = me.locator(".live-responses-table tbody .response-col_status").first
    answer.wait_for(timeout=30000)
    assert answer.inner_text().strip() == "200"
    assert '"rita"' in me.locator(".live-responses-table .microlight").first.inner_text()

    origin = urlsplit(live_server.url).netloc
    external = [u for u in requested if urlsplit(u).scheme in {"http", "https", "ws", "wss"}]
    assert [u for u in external if urlsplit(u).netloc != origin] == []
    assert any("/static/drf_spectacular_sidecar/swagger-ui-dist/" in u for u in requested)
