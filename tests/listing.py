"""Rows for the list tests, made n at a time: models with versions, releases, deployments,
benchmark runs and alerts, on two clusters (services where a row is cheap to make that way,
plain rows cloned from a registered version where an upload per row would be slow)."""

import io

from django.forms.models import model_to_dict

from benchmarks.models import BenchmarkRun
from deployments.models import Deployment
from deployments.services import cluster_create
from health.services import Finding, alert_fire
from models_registry.models import ModelVersion
from models_registry.services import model_create, model_version_register, team_create
from releases.models import Release
from tests.registry.archives import example_entries, tar_gz

VERSION_FIELDS_NOT_COPIED = {"id", "model", "version", "label", "created_by"}


class Rows:
    """A team, one registered version to clone, two clusters; `grow(n)` adds n of each row."""

    def __init__(self, ada, rita):
        self.ada, self.rita = ada, rita
        team_create(name="lists", actor=ada)
        self.model = model_create(name="listed", team="lists", actor=ada)
        entries = example_entries("risk_score", 1)
        entries[0] = (entries[0][0], entries[0][1].replace(b"risk_score", b"listed"))
        archive = io.BytesIO(tar_gz(entries))
        self.base = model_version_register(model=self.model, actor=ada, archive=archive)
        self.clusters = [
            cluster_create(actor=rita, name=name, environment=env)
            for name, env in (("list-prod", "production"), ("list-stage", "staging"))
        ]
        self.made = 0

    def _version(self, model, number: int) -> ModelVersion:
        fields = {
            k: v for k, v in model_to_dict(self.base).items() if k not in VERSION_FIELDS_NOT_COPIED
        }
        return ModelVersion.objects.create(
            model=model, version=number, label=f"v{number}", created_by=self.ada, **fields
        )

    def grow(self, n: int) -> None:
        for _ in range(n):
            self.made += 1
            i = self.made
            cluster = self.clusters[i % 2]
            cluster_create(actor=self.rita, name=f"list-{i}", environment="staging")
            other = model_create(name=f"listed_{i}", team="lists", actor=self.ada)
            version = self._version(self.model, i + 1)
            self._version(other, 1)
            Release.objects.create(
                cluster=cluster, model=self.model, baseline=self.base, candidate=version, steps=[]
            )
            Deployment.objects.create(
                cluster=cluster, model=self.model, version=version, requested_by=self.rita
            )
            BenchmarkRun.objects.create(version=version, cluster=cluster, requested_by=self.ada)
            alert_fire(
                finding=Finding(
                    kind="silent_failure",
                    severity="critical",
                    summary=f"listed v{i + 1}: requests failed",
                    cluster=cluster,
                    model="listed",
                    version=i + 1,
                )
            )
