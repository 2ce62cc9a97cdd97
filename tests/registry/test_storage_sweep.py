"""Sweeping the blob store: real files, real PostgreSQL."""

import io
import os
import time

import pytest
from django.core.management import call_command

from audit.models import AuditEvent
from models_registry.models import ModelVersion
from models_registry.services import (
    model_create,
    model_version_delete,
    model_version_register,
    storage_sweep,
    team_create,
)
from models_registry.storage import blob_path, blob_verify, storage_root, stored_blobs
from tests.registry.archives import example_entries, tar_gz

pytestmark = pytest.mark.django_db

HOUR = 3600


@pytest.fixture
def ada(settings, tmp_path, make_user):
    settings.SWITCHYARD_STORAGE_ROOT = tmp_path / "artifacts"
    user = make_user("ada", role="algorithm")
    team_create(name="fraud", actor=user)
    return user


def _register(model, user, variant: int) -> ModelVersion:
    archive = io.BytesIO(tar_gz(example_entries("risk_score", variant)))
    return model_version_register(model=model, archive=archive, actor=user)


def _age(path, seconds: float) -> None:
    past = time.time() - seconds
    os.utime(path, (past, past))


def test_only_files_no_remaining_version_uses_go_once_past_the_grace(ada):
    model = model_create(name="risk_score", team="fraud", actor=ada)
    v1, v2 = _register(model, ada, 1), _register(model, ada, 2)
    shared = {e["sha256"] for e in v1.manifest} & {e["sha256"] for e in v2.manifest}
    assert shared  # the config is stored once for both
    only_v1 = {e["sha256"] for e in v1.manifest} - shared
    model_version_delete(version=v1, actor=ada)

    assert storage_sweep(grace_s=HOUR).blobs_removed == 0  # just written: within the grace
    for _, path in stored_blobs():
        _age(path, 2 * HOUR)
    dry = storage_sweep(grace_s=HOUR, dry_run=True)
    assert (dry.blobs_removed, dry.dry_run) == (len(only_v1), True)
    assert all(blob_path(s).exists() for s in only_v1)
    assert not AuditEvent.objects.filter(action="storage.swept").exists()

    done = storage_sweep(grace_s=HOUR)
    assert done.blobs_removed == len(only_v1) and done.blobs_kept == len(v2.manifest)
    assert done.bytes_freed == sum(e["size"] for e in v1.manifest if e["sha256"] in only_v1)
    assert not any(blob_path(s).exists() for s in only_v1)
    assert all(blob_verify(e["sha256"]) for e in v2.manifest)  # v2 whole, shared file kept
    event = AuditEvent.objects.get(action="storage.swept")
    assert event.details["blobs_removed"] == len(only_v1)
    assert storage_sweep(grace_s=0).blobs_removed == 0  # nothing left to do


def test_a_new_upload_sharing_an_old_unreferenced_file_keeps_it(ada):
    """An upload publishes its blobs before its version row commits: a file it shares with a
    deleted version is touched then, so a sweep in between takes it for new."""
    model = model_create(name="risk_score", team="fraud", actor=ada)
    v1 = _register(model, ada, 1)
    config = next(e["sha256"] for e in v1.manifest if e["role"] == "config")
    model_version_delete(version=v1, actor=ada)
    _age(blob_path(config), 2 * HOUR)
    before = time.time()
    v2 = _register(model, ada, 2)  # same config file
    # The upload touched the shared file (aged 2 h back): its time is the upload's, not
    # the old one (1 s for file systems that keep whole seconds).
    assert blob_path(config).stat().st_mtime >= before - 1
    ModelVersion.objects.filter(pk=v2.pk).delete()  # as if its row had not committed yet
    storage_sweep(grace_s=HOUR)
    assert blob_path(config).exists()


def test_abandoned_upload_folders_go_and_the_command_reports(ada, capsys):
    staging = storage_root() / "staging"
    old, fresh = staging / "old-upload", staging / "running-upload"
    for folder in (old, fresh):
        folder.mkdir(parents=True)
        (folder / "000001").write_bytes(b"partial")
    for path in (old / "000001", old):
        _age(path, 8 * HOUR)
    call_command("storage_sweep", "--dry-run")
    assert "would remove 0 stored file(s), 0.0 MB, and 1 abandoned upload folder(s)" in (
        capsys.readouterr().out
    )
    assert old.exists()
    call_command("storage_sweep")  # default grace: 6 hours
    assert not old.exists() and fresh.exists()
