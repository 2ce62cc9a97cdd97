"""Release plan pages in Chromium: the list, the waves x clusters grid, four-eyes approval
through the form (the author sees why there is no button), and the one stop."""

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, transaction

from deployments.services import cluster_create, node_create, serving_state_set
from plans.models import PlanApproval, ReleasePlan
from plans.services import plan_action, plan_create
from tests.browser.helpers import login
from tests.conftest import in_thread
from tests.release_setup import release_world

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def plan(make_user, settings, tmp_path):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    with transaction.atomic():
        world = release_world(make_user)
        eu = cluster_create(actor=world["rita"], name="eu", environment="production",
                            router={"driver": "nginx", "listen": "127.0.0.1:4"})  # fmt: skip
        serving_state_set(cluster=eu, model=world["model"], versions=[world["versions"][0]])
        node_create(cluster=eu, actor=world["rita"], name="eu1", http_url="http://127.0.0.1:9")
    make_user("remy", role="release-managers")
    make_user("rita2", role="release-managers")
    waves = [{"clusters": ["prod"], "bake_s": 60}, {"clusters": ["eu"], "approval": True}]
    found = plan_create(candidate=world["versions"][1], waves=waves, actor=world["rita"])
    ReleasePlan.objects.filter(pk=found.pk).update(phase="WAITING_APPROVAL", wave_index=1)
    return found


def test_a_second_release_manager_approves_a_wave_on_the_plan_page(plan, live_server, page):
    base = live_server.url
    login(page, base, "rita")
    page.click("a.nav-link:has-text('Plans')")
    page.wait_for_url(f"{base}/plans/")  # the click waits for the navigation to start only
    assert page.locator("[data-testid=plan-table] tbody tr").count() == 1
    page.click(f"a[href='/plans/{plan.pk}/']")
    cells = page.locator("[data-testid=plan-cell]")
    assert [cells.nth(i).get_attribute("data-cluster") for i in range(2)] == ["prod", "eu"]
    assert "not started" in cells.nth(1).inner_text()
    waiting = page.locator("[data-testid=plan-waiting]").inner_text()
    assert "approval of wave 2 by a release manager other than rita" in waiting
    assert page.locator("[data-testid=plan-decide]").count() == 0  # four-eyes
    assert (
        "another release manager approves"
        in page.locator("[data-testid=plan-four-eyes]").inner_text()
    )
    page.context.clear_cookies()
    login(page, base, "remy")
    page.goto(f"{base}/plans/{plan.pk}/")
    page.fill("#decide-comment", "CAB-12 approved")
    page.click("[data-testid=plan-decide] button[value=approve]")
    page.wait_for_url(f"{base}/plans/{plan.pk}/")
    approvals = page.locator("[data-testid=plan-approvals]").inner_text()
    assert "wave 2: approved by remy: CAB-12 approved" in approvals
    assert PlanApproval.objects.get(plan=plan).actor_name == "remy"
    page.click("[data-testid=plan-halt]")
    page.wait_for_url(f"{base}/plans/{plan.pk}/")
    assert ReleasePlan.objects.get(pk=plan.pk).pending_action["action"] == "halt"
    assert "remy asked to halt" in page.locator("#plan-grid").inner_text()


def test_other_roles_read_a_plan_but_have_no_buttons(plan, make_user, live_server, page):
    make_user("ada2", role="algorithm")
    login(page, live_server.url, "ada2")
    page.goto(f"{live_server.url}/plans/{plan.pk}/")
    assert page.locator("[data-testid=plan-waves]").is_visible()
    assert page.locator("[data-testid=plan-decide]").count() == 0
    assert page.locator("[data-testid=plan-actions]").count() == 0
    assert (
        "No release of this plan has started yet"
        in page.locator("[data-testid=plan-cost]").inner_text()
    )


def _approve(plan, approver) -> None:
    plan_action(plan=plan, action="approve", actor=approver, comment="from the API")
    connection.close()  # the thread's own connection


def _succeed(plan_id: int) -> None:
    found = ReleasePlan.objects.get(pk=plan_id)
    found.phase, found.reason = "SUCCEEDED", "every wave succeeded"
    found.save(update_fields=["phase", "reason"])
    connection.close()


def test_the_plan_page_follows_the_plan_over_its_socket(daphne_server, page, plan):
    """Served by the real ASGI server: the page listens on /ws/plans/<id>/ and redraws its
    grid, approvals and events when the plan changes, with no timer polling while live."""
    base = f"http://{daphne_server}"
    login(page, base, "remy")
    page.goto(f"{base}/plans/{plan.pk}/")
    page.wait_for_selector("[data-testid=plan-live-badge]:has-text('live')", timeout=30000)
    page.fill("#decide-comment", "half typed")  # a form being filled in is left alone
    # Playwright's loop owns this thread: the changes are made from another one.
    approver = get_user_model().objects.get(username="rita2")
    in_thread(_approve, plan, approver)
    page.locator("#decide-comment").blur()
    page.wait_for_selector("[data-testid=plan-approvals]:has-text('approved by rita2')")
    events = page.locator("[data-testid=plan-events]").inner_text()
    assert "rita2 approved wave 2: from the API" in events
    # Redrawn times are shown in the browser's zone like the rest (UTC on hover).
    assert (
        page.locator("[data-testid=plan-events] time").first.get_attribute("title").endswith("UTC")
    )
    assert int(page.get_attribute("#plan-live", "data-updates")) > 0
    assert page.inner_text("[data-testid=plan-live-badge]") == "live"
    page.evaluate("document.getElementById('plan-cost').dataset.before = 'yes'")
    in_thread(_succeed, plan.pk)
    page.wait_for_selector("[data-testid=plan-live-badge]:has-text('finished')", timeout=10000)
    assert "every wave succeeded" in page.locator("[data-testid=plan-reason]").inner_text()
    assert page.locator("[data-testid=plan-decide]").count() == 0  # nothing waits any more
    assert page.get_attribute("#plan-cost", "data-before") is None  # redrawn: the plan changed
