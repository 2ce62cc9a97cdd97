"""Which backends a cluster may load: SWITCHYARD_ALLOWED_BACKENDS everywhere, plus the
cluster's own `custom_backends` (an operator's audited choice, docs/SECURITY.md)."""

from __future__ import annotations

from collections.abc import Iterable

from django.conf import settings

from deployments.models import TritonCluster
from deployments.push import CorruptArtifact
from integrations.triton.model_config import backend_of
from models_registry.models import ModelVersion


class BackendRefused(CorruptArtifact):
    """A version's backend is not allowed on the cluster: nothing is loaded (caught where a
    corrupt artifact is: refused before any load)."""


def version_backend(version: ModelVersion) -> str:
    """The backend the version's stored config runs on (its platform's, for a platform)."""
    config = version.config_json or {}
    return backend_of(config.get("backend", ""), config.get("platform", ""))


def cluster_allows(cluster: TritonCluster, backend: str) -> bool:
    """True when `cluster` may load `backend`."""
    return backend in settings.SWITCHYARD_ALLOWED_BACKENDS or backend in (
        cluster.custom_backends or []
    )


def backend_refusal(cluster: TritonCluster, versions: Iterable[ModelVersion]) -> str:
    """Why `cluster` may not load one of `versions` ('' when it may load them all)."""
    for version in versions:
        backend = version_backend(version)
        if not cluster_allows(cluster, backend):
            return (
                f"{version.model.name} v{version.version} runs on backend '{backend}', which "
                f"cluster '{cluster.name}' does not allow: it is not in "
                "SWITCHYARD_ALLOWED_BACKENDS nor in the cluster's custom_backends (an operator "
                f"adds it with PATCH /api/v1/clusters/{cluster.name}/)"
            )
    return ""


def refuse_unless_allowed(cluster: TritonCluster, versions: Iterable[ModelVersion]) -> None:
    """Raise BackendRefused unless `cluster` may load every one of `versions`."""
    if reason := backend_refusal(cluster, versions):
        raise BackendRefused(reason)


def custom_backends_in_use(**kwargs) -> set[str]:
    """Every backend some cluster allows explicitly (the registry asks at upload)."""
    found: set[str] = set()
    for names in TritonCluster.objects.values_list("custom_backends", flat=True):
        found.update(name for name in names or [] if isinstance(name, str))
    return found
