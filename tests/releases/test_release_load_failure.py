"""A candidate that cannot load on the nodes: the serving-set service raises LoadFailed
naming every node, the tick records it, and the release fails before any traffic moved."""

import io
import time

import pytest

from releases.services import release_create
from tests.registry.archives import example_entries, tar_gz
from tests.releases.test_release_flow import (
    Traffic,
    _loaded,
    _model_with_baseline,
    _tick_until,
    _unload,
    assert_retries_within,
    release_world,  # noqa: F401 - fixture
    ticking,  # noqa: F401 - fixture
)

pytestmark = [pytest.mark.triton, pytest.mark.django_db(transaction=True)]

BROKEN = b'''"""A version whose initialize fails, as an out-of-memory load would."""


class TritonPythonModel:
    def initialize(self, args):
        raise RuntimeError("cannot allocate the weights")

    def execute(self, requests):
        return []
'''


def _register_broken(model, user):
    from models_registry.services import model_version_register

    entries = example_entries("risk_score", 1)
    config = entries[0][1].replace(b'name: "risk_score"', f'name: "{model.name}"'.encode())
    files = [(name, BROKEN if name.endswith("/model.py") else data) for name, data in entries[1:]]
    archive = io.BytesIO(tar_gz([("config.pbtxt", config), *files]))
    return model_version_register(model=model, archive=archive, actor=user)


def test_a_candidate_that_cannot_load_fails_the_release_naming_each_node(
    release_world,  # noqa: F811
    ticking,  # noqa: F811
):
    world = release_world
    model, baseline, _ = _model_with_baseline(
        world, "rel_noload", 2, {"p99_latency_ms": 2000, "min_success_rate": 99.0}
    )
    broken = _register_broken(model, world["ada"])
    with Traffic(world["port"], "rel_noload") as traffic:
        traffic.more(20)  # traffic flows
        release = release_create(
            cluster=world["cluster"],
            candidate=broken,
            actor=world["rita"],
            steps=[50, 100],
            step_interval_s=2,
            drain_s=0.5,
            progress_deadline_s=120,
        )
        release = _tick_until(ticking, release, {"SUCCEEDED", "ROLLED_BACK", "FAILED"})
        time.sleep(0.5)
    assert release.phase == "FAILED", release.reason
    assert release.load_error.startswith("loading baseline+candidate failed on 2 node(s): ")
    assert all(node.name in release.load_error for node in world["nodes"]), release.load_error
    assert release.reason == f"candidate failed to load: {release.load_error}"
    failed = release.events.filter(kind="effect_failed").first()
    assert failed is not None and failed.message == release.load_error
    # No traffic ever reached the candidate, and the baseline kept serving throughout.
    assert release.candidate_weight == 0.0
    assert traffic.failed == 0 and set(traffic.versions) == {"1"}, traffic.summary()
    assert_retries_within(traffic, release)
    assert _loaded(world, "rel_noload") == [{"1"}, {"1"}]
    _unload(world, model)
    assert baseline.version == 1
