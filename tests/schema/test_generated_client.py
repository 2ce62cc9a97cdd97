"""A client generated from /api/schema/ (openapi-python-client) drives one full flow on the
real stack: daphne, a Celery worker, release ticks, real Triton nodes behind nginx. Register
and upload, wait for the checks, deploy, release a canary to promoted; every answer parsed
into the schema's own types (a body the schema does not describe would not parse)."""

import importlib
import subprocess
import sys
import time

import pytest

from models_registry.models import Model
from releases import routing
from tests.cli.test_cli_flow import smoke_cluster, stack  # noqa: F401 - fixtures
from tests.conftest import ROOT
from tests.registry.archives import example_entries, tar_gz
from tests.releases.test_release_flow import (
    Traffic,
    _loaded,
    _unload,
    release_world,  # noqa: F401 - fixture
)
from tests.ticking import Lanes, Ticking

pytestmark = [pytest.mark.triton, pytest.mark.django_db(transaction=True)]
PACKAGE = "switchyard_generated"


@pytest.fixture
def generated(tmp_path):
    """The client package generated from the schema the server serves, imported."""
    schema = tmp_path / "schema.yaml"
    env = {"DJANGO_SETTINGS_MODULE": "controlplane.settings.test"}
    manage = [sys.executable, "manage.py", "spectacular", "--file", str(schema)]
    subprocess.run(manage, cwd=ROOT, check=True, env={**_environ(), **env}, timeout=120)
    out = tmp_path / PACKAGE
    generate = [
        *[str(ROOT / ".venv" / "bin" / "openapi-python-client"), "generate"],
        *["--path", str(schema), "--output-path", str(out), "--meta", "none"],
    ]
    done = subprocess.run(generate, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    # The only piece it leaves out: the archive download's gzip body (a raw file by design).
    said = (done.stdout + done.stderr).splitlines()
    skipped = [line for line in said if line.startswith("WARNING parsing")]
    archive = "GET /api/v1/models/{name}/versions/{version}/archive/"
    assert skipped == [f"WARNING parsing {archive} within v1."], done.stdout
    sys.path.insert(0, str(tmp_path))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m.split(".")[0] == PACKAGE]:
            del sys.modules[name]


def _environ() -> dict:
    import os

    return dict(os.environ)


def _api(generated, name: str):
    return importlib.import_module(f"{PACKAGE}.api.v1.{name}")


def _models(generated):
    return importlib.import_module(f"{PACKAGE}.models")


def _token(generated, url: str, user: str) -> str:
    models = _models(generated)
    client = generated.Client(base_url=url, raise_on_unexpected_status=True)
    body = models.TokenCreateInput(username=user, password=f"pw-{user}")
    answer = _api(generated, "v1_auth_token_create").sync(client=client, body=body)
    assert isinstance(answer, models.TokenCreateOutput), answer
    return answer.token


def _client(generated, url: str, token: str):
    return generated.AuthenticatedClient(
        base_url=url, token=token, prefix="Token", raise_on_unexpected_status=True, timeout=90
    )


def _waited(retrieve, *args, client, deadline_s: float = 180):
    """The resource once finished, through ?wait= long-polls."""
    deadline = time.monotonic() + deadline_s
    while True:
        found = retrieve.sync(*args, client=client, wait=30)
        if found.finished or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def _upload(generated, ada, variant: int, label: str):
    models = _models(generated)
    from switchyard_generated.types import File  # noqa: PLC0415 - generated at test time

    archive = File(payload=tar_gz(example_entries("risk_score", variant)), file_name="b.tar.gz")
    body = models.VersionListCreateInput(archive=archive, label=label)
    created = _api(generated, "v1_models_versions_create").sync("risk_score", client=ada, body=body)
    assert isinstance(created, models.VersionUploaded), created
    assert (created.finished, created.outcome) == (False, None)
    assert any("has no SLA" in w for w in created.warnings), created.warnings
    return created


def test_a_generated_client_registers_deploys_and_promotes_a_canary(stack, generated):  # noqa: F811
    world, models = stack, _models(generated)
    ada = _client(generated, world["url"], _token(generated, world["url"], "ada"))
    rita = _client(generated, world["url"], _token(generated, world["url"], "rita"))
    body = models.ModelListCreateInput(name="risk_score", team="fraud")
    assert _api(generated, "v1_models_create").sync(client=ada, body=body).name == "risk_score"
    versions = [_upload(generated, ada, n, f"build-{n}") for n in (1, 2)]
    retrieve = _api(generated, "v1_models_versions_retrieve")
    for created in versions:
        checked = _waited(retrieve, "risk_score", created.version, client=ada)
        assert (checked.state, checked.outcome) == (models.VersionStateEnum.SUCCEEDED, "succeeded")

    body = models.DeploymentCreateInput(cluster="canary", model="risk_score", version=1)
    accepted = _api(generated, "v1_deployments_create").sync(client=rita, body=body)
    assert isinstance(accepted, models.DeploymentAccepted), accepted
    deployment = _waited(_api(generated, "v1_deployments_retrieve"), accepted.id, client=rita)
    assert deployment.outcome == "succeeded", deployment.error
    model = _api(generated, "v1_models_retrieve").sync("risk_score", client=ada)
    assert model.aliases["production"] == 1  # a deploy to a production cluster moved it
    routing.router_for(world["cluster"]).apply(routing.router_state(world["cluster"], []))

    beat = Ticking(Lanes.of(world["worker"]))  # ticks on the stack's worker, queued as beat does
    beat.start()
    try:
        with Traffic(world["port"], "risk_score") as traffic:
            traffic.more(20)
            body = models.ReleaseListCreateInput.from_dict(
                {
                    **{"cluster": "canary", "model": "risk_score", "candidate_version": 2},
                    **{"steps": [50, 100], "step_interval_s": 2},
                    "analysis": {"min_requests": 10, "max_failed_checks": 2},
                }
            )
            release = _api(generated, "v1_releases_create").sync(client=rita, body=body)
            assert isinstance(release, models.Release), release
            assert (release.finished, release.outcome) == (False, None)
            done = _waited(
                _api(generated, "v1_releases_retrieve"), release.id, client=rita, deadline_s=240
            )
    finally:
        beat.stop()
    assert (done.state, done.finished, done.outcome) == ("succeeded", True, "succeeded"), done
    model = _api(generated, "v1_models_retrieve").sync("risk_score", client=ada)
    assert model.aliases["production"] == 2
    assert _loaded(world, "risk_score") == [{"2"}, {"2"}]
    _unload(world, Model.objects.get(name="risk_score"))
