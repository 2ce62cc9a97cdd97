"""The production alias rule, deploy path: a successful deploy to a production cluster moves
`production` to the version it serves; staging, failed deploys and unloads leave it. (The
release path, promote moves it and rollback leaves it: tests/releases/test_release_flow.py.)"""

import io

import pytest

from deployments.models import Deployment
from deployments.services import cluster_create, deployment_finish
from models_registry.services import alias_set, model_create, model_version_register, team_create
from tests.registry.archives import example_entries, tar_gz

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(settings, tmp_path, make_user):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    rita = make_user("rita", role="release-managers")
    ada = make_user("ada", role="algorithm")
    team_create(name="fraud", actor=ada)
    model = model_create(name="risk_score", team="fraud", actor=ada)
    versions = [
        model_version_register(
            model=model, archive=io.BytesIO(tar_gz(example_entries("risk_score", n))), actor=ada
        )
        for n in (1, 2)
    ]
    clusters = {
        env: cluster_create(actor=rita, name=f"c-{env}", environment=env, router={"driver": "none"})
        for env in ("staging", "production")
    }
    alias_set(model=model, name="production", version=versions[0], actor=ada)
    return {"model": model, "versions": versions, "clusters": clusters, "rita": rita}


def _finished(world, env: str, *, ok: bool, kind=Deployment.Kind.DEPLOY) -> None:
    version = world["versions"][1] if kind == Deployment.Kind.DEPLOY else None
    deployment = Deployment.objects.create(
        cluster=world["clusters"][env],
        model=world["model"],
        version=version,
        kind=kind,
        requested_by=world["rita"],
    )
    deployment_finish(deployment, ok=ok, error="" if ok else "load failed")


def _production(world) -> int:
    return world["model"].aliases.get(name="production").version.version


def test_a_successful_deploy_to_production_moves_the_alias(world):
    _finished(world, "production", ok=True)
    assert _production(world) == 2
    moves = world["model"].aliases.get(name="production").moves.order_by("-pk")
    assert moves.first().moved_by is None  # Switchyard moved it, audited as such


@pytest.mark.parametrize(
    "env,ok,kind",
    [
        ("staging", True, Deployment.Kind.DEPLOY),
        ("production", False, Deployment.Kind.DEPLOY),
        ("production", True, Deployment.Kind.UNLOAD),
    ],
)
def test_staging_failed_or_unload_leave_the_alias(world, env, ok, kind):
    _finished(world, env, ok=ok, kind=kind)
    assert _production(world) == 1
