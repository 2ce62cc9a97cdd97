"""The demo's ghost for the cost reports: a model served on the demo cluster that demo
traffic never calls, so the Reports page lists it with its monthly cost."""

import io
import tarfile

from django.conf import settings

from demo.targets import NO_DEMO_TRAFFIC_TAG
from deployments.services import DeploymentError, deployment_create, serving_versions
from models_registry.models import Model
from models_registry.services import Provenance, model_create, model_version_register

GHOST_MODEL = "fraud_legacy"
_SOURCE = settings.BASE_DIR / "examples" / "model_repository" / "risk_score"


def _ghost_archive() -> io.BytesIO:
    """risk_score v1's files under the ghost's name (Triton wants the folder's name)."""
    config = (_SOURCE / "config.pbtxt").read_bytes()
    config = config.replace(b'name: "risk_score"', f'name: "{GHOST_MODEL}"'.encode())
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("config.pbtxt")
        info.size = len(config)
        tar.addfile(info, io.BytesIO(config))
        for path in sorted((_SOURCE / "1").rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                tar.add(path, arcname=f"1/{path.relative_to(_SOURCE / '1')}")
    buf.seek(0)
    return buf


def demo_ghost_seed(*, cluster, actor) -> list[str]:
    """Register and deploy the ghost model once; what was done, as lines for the terminal."""
    model = Model.objects.filter(name=GHOST_MODEL).first()
    if model is None:
        model = model_create(
            name=GHOST_MODEL,
            team="fraud",
            description="An old fraud model nobody calls any more: the demo's cost ghost.",
            tags=["fraud", NO_DEMO_TRAFFIC_TAG],
            actor=actor,
        )
    version = model.versions.order_by("version").first() or model_version_register(
        model=model,
        archive=_ghost_archive(),
        actor=actor,
        provenance=Provenance(label="v2023.11", notes="kept loaded, never called"),
    )
    if serving_versions(cluster=cluster, model=model):
        return []
    try:
        deployment_create(cluster=cluster, version=version, actor=actor)
    except DeploymentError as exc:
        return [f"not deployed: {exc.message}"]
    return [f"deploying {GHOST_MODEL} v{version.version} on {cluster.name} (no traffic: a ghost)"]
