"""A plan's wave waits, saying why, for a cluster where no release can start: one whose node
is down (as reconcile recorded it). Ticked by the session's releases-lane worker with beat's
tick entries queued on a timer (tests/ticking.py); nothing here needs a Triton node."""

import pytest
from django.db import transaction

from deployments.models import TritonNode
from plans.models import PlanRelease, ReleasePlan
from plans.services import plan_create
from releases.models import Release
from tests.conftest import wait_for
from tests.release_setup import release_world
from tests.ticking import Ticking

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_wave_waits_for_a_cluster_out_of_reach_and_says_why(lanes, make_user, settings):
    settings.SWITCHYARD_STORAGE_ROOT = lanes.storage
    with transaction.atomic():  # serving states are set under a row lock
        world = release_world(make_user)
    TritonNode.objects.filter(name="n1").update(health="down", last_error="connection refused")
    plan = plan_create(candidate=world["versions"][1], waves=[{"clusters": ["prod"]}],
                       actor=world["rita"])  # fmt: skip

    def waiting():
        found = ReleasePlan.objects.get(pk=plan.pk)
        return found if "out of reach" in found.reason else None

    with Ticking(lanes):
        held = wait_for(waiting, timeout_s=60, what="the plan waiting for prod")
    assert held.phase == "RUNNING"
    assert held.reason == "waits: prod is out of reach (n1: connection refused)"
    assert PlanRelease.objects.get(plan=plan).release is None and not Release.objects.exists()
