"""Writes to the registry. Each is one transaction and records an audit event."""

import io
import shutil
import time
from dataclasses import dataclass
from typing import Any, BinaryIO

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from accounts.errors import ApplicationError
from audit.services import audit_record
from integrations.triton.model_config import ConfigReport, config_to_dict, validate_model_config
from integrations.triton.model_config.patch import PatchError, config_patched
from integrations.triton.names import reserved_shape
from models_registry import selectors
from models_registry.archive import (
    CONFIG_NAME,
    MAX_CONFIG_BYTES,
    ArchiveLimits,
    ArchiveRefused,
    ExtractedUpload,
    extract_upload,
)
from models_registry.models import (
    PRODUCTION_ALIAS,
    Alias,
    AliasMove,
    Model,
    ModelVersion,
    Team,
)
from models_registry.signals import protected_change, version_registered
from models_registry.storage import (
    StagedFile,
    Staging,
    blob_path,
    blob_remove,
    manifest_digest,
    staging_folders,
    stored_blobs,
)
from models_registry.untrusted import allowed_backends, custom_backends, upload_code_issues


class RegistryError(ApplicationError):
    """A registry write refused (400 unless `status` says: 403 not a member, 409 a conflict)."""


class DuplicateVersion(RegistryError):
    """An upload whose files (manifest digest) equal an existing version's: a 409 naming it."""

    def __init__(self, version: ModelVersion):
        message = (
            f"These files are already version {version.version} ('{version.label}') of "
            f"{version.model.name} (digest {version.digest[:12]}); "
            "add ?return_existing=true to get that version instead."
        )
        super().__init__(message, field="archive", status=409)
        self.version = version


def _errors_from_validation(exc: ValidationError) -> list[dict]:
    return [{"field": f, "message": m} for f, ms in exc.message_dict.items() for m in ms]


def _full_clean(obj, **kwargs) -> None:
    try:
        obj.full_clean(**kwargs)
    except ValidationError as exc:
        errors = _errors_from_validation(exc)
        raise RegistryError(errors[0]["message"], errors=errors) from None


def team_write_check(*, actor, team: Team, what: str) -> None:
    """Refuse (403) `what` unless `actor` is a member of `team` or a superuser.

    `actor=None` is Switchyard itself (a release moving its alias, the demo seeding).
    """
    if actor is None or selectors.user_in_team(user=actor, team=team):
        return
    raise RegistryError(
        f"{what} needs membership of team '{team.name}'; a superuser adds members.",
        status=403,
    )


def team_create(*, name: str, actor) -> Team:
    """Create a team with a unique name, its creator as first member; audited."""
    team = Team(name=name)
    _full_clean(team, validate_unique=False)
    try:
        with transaction.atomic():
            team.save()
            if actor is not None and actor.is_authenticated:
                team.members.add(actor)
            audit_record(actor=actor, action="team.created", obj=team)
    except IntegrityError as exc:
        raise RegistryError(
            f"A team named '{name}' already exists.", field="name", status=409
        ) from exc
    return team


def _superuser_check(actor, what: str) -> None:
    if actor is not None and not (actor.is_authenticated and actor.is_superuser):
        raise RegistryError(f"{what} is for superusers.", status=403)


def team_member_add(*, team: Team, username: str, actor) -> Team:
    """Make a user a member of `team` (superusers only; adding twice is a no-op); audited."""
    _superuser_check(actor, "Managing team members")
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise RegistryError(f"No user named '{username}'.", field="username")
    with transaction.atomic():
        if not team.members.filter(pk=user.pk).exists():
            team.members.add(user)
            audit_record(
                actor=actor, action="team.member_added", obj=team, details={"username": username}
            )
    return team


def team_member_remove(*, team: Team, username: str, actor) -> Team:
    """Remove a member from `team` (superusers only); 404-like error when not a member."""
    _superuser_check(actor, "Managing team members")
    user = team.members.filter(username=username).first()
    if user is None:
        raise RegistryError(f"'{username}' is not a member of team '{team.name}'.", status=404)
    with transaction.atomic():
        team.members.remove(user)
        audit_record(
            actor=actor, action="team.member_removed", obj=team, details={"username": username}
        )
    return team


SLA_FIELDS = (
    "p99_latency_ms", "min_success_rate", "max_queue_ms", "min_throughput_rps",
    "p95_first_token_ms", "p95_inter_token_ms", "min_tokens_per_s",
)  # fmt: skip


def _apply_sla(model: Model, sla: dict[str, Any] | None) -> None:
    for key, value in (sla or {}).items():
        if key not in SLA_FIELDS:
            raise RegistryError(f"Unknown SLA field '{key}'.", field=f"sla.{key}")
        setattr(model, f"sla_{key}", value)


def model_create(
    *,
    name: str,
    team: str,
    actor,
    description: str = "",
    tags: list[str] | None = None,
    sla: dict[str, Any] | None = None,
) -> Model:
    """Register a model name under a team; names are unique; audited. A name shaped like
    one the control plane loads itself (integrations/triton/names.py) is refused."""
    if shape := reserved_shape(name):
        raise RegistryError(
            f"'{name}' is named like {shape} (<model>--smoke-, --bench-, --c<version>): its "
            "traffic and costs would be filed as another model's. Choose another name.",
            field="name",
        )
    team_obj = Team.objects.filter(name=team).first()
    if team_obj is None:
        raise RegistryError(f"No team named '{team}'.", field="team")
    team_write_check(actor=actor, team=team_obj, what="Creating a model")
    model = Model(
        name=name, team=team_obj, description=description, tags=tags or [], created_by=actor
    )
    _apply_sla(model, sla)
    _full_clean(model, validate_unique=False, exclude=["created_by"])
    try:
        with transaction.atomic():
            model.save()
            audit_record(
                actor=actor,
                action="model.created",
                obj=model,
                details={"team": team, "sla": model.sla},
            )
    except IntegrityError as exc:
        raise RegistryError(
            f"A model named '{name}' already exists.", field="name", status=409
        ) from exc
    return model


def model_update(
    *,
    model: Model,
    actor,
    description: str | None = None,
    tags: list[str] | None = None,
    team: str | None = None,
    sla: dict[str, Any] | None = None,
) -> Model:
    """Change a model's description, tags, team or SLA; records before/after; audited.

    Only members of its team (and of the new team) write; an SLA change is refused (409)
    while a release of the model is active.
    """
    with transaction.atomic():
        model = (
            Model.objects.select_for_update(of=("self",)).select_related("team").get(pk=model.pk)
        )
        team_write_check(actor=actor, team=model.team, what=f"Changing model '{model.name}'")
        before = {
            "sla": model.sla,
            "description": model.description,
            "tags": list(model.tags),
            "team": model.team.name,
        }
        if description is not None:
            model.description = description
        if tags is not None:
            model.tags = tags
        if team is not None:
            model.team = Team.objects.filter(name=team).first() or _no_team(team)
            team_write_check(actor=actor, team=model.team, what=f"Moving a model to team '{team}'")
        _apply_sla(model, sla)
        if model.sla != before["sla"]:
            protected_change.send(sender=Model, model=model, change="sla", release_id=None)
        _full_clean(model, validate_unique=False, exclude=["created_by"])
        model.save()
        after = {
            "sla": model.sla,
            "description": model.description,
            "tags": list(model.tags),
            "team": model.team.name,
        }
        audit_record(
            actor=actor,
            action="model.updated",
            obj=model,
            details={"before": before, "after": after},
        )
    return model


def _no_team(team: str):
    raise RegistryError(f"No team named '{team}'.", field="team")


@dataclass(frozen=True)
class Provenance:
    label: str = ""
    notes: str = ""
    source_commit: str = ""
    training_run_url: str = ""


def model_version_register(
    *,
    model: Model,
    archive: BinaryIO,
    actor,
    provenance: Provenance = Provenance(),
    refuse_duplicate: bool = False,
) -> ModelVersion:
    """Check, store and register an uploaded model directory as the model's next version.

    `refuse_duplicate`: files equal to an existing version's raise DuplicateVersion (the API).

    Nothing is stored when anything is refused: the staging folder is discarded, blobs this
    call created are removed if the database write fails. Members of the model's team only.
    """
    team_write_check(
        actor=actor, team=model.team, what=f"Uploading a version of model '{model.name}'"
    )
    try:
        upload = extract_upload(archive, limits=_archive_limits())
    except ArchiveRefused as exc:
        raise RegistryError(exc.message, errors=[_archive_error(exc)]) from None
    try:
        report = _upload_checked(model, upload)
        return _stored_version(
            model=model,
            actor=actor,
            provenance=provenance,
            refuse_duplicate=refuse_duplicate,
            upload=upload,
            report=report,
        )
    finally:
        upload.staging.discard()


def _stored_version(*, model, actor, provenance, refuse_duplicate, upload, report, **extra):
    """The checked upload's files moved into the blob store and its version row saved; the
    blobs this call created are removed again if the row is not."""
    manifest = [
        {"role": f.role, "path": f.path, "size": f.size, "sha256": f.sha256}
        for f in sorted(upload.all_files, key=lambda f: (f.role, f.path))
    ]
    created = upload.staging.commit(upload.all_files)
    try:
        return _version_save(
            model=model,
            actor=actor,
            provenance=provenance,
            refuse_duplicate=refuse_duplicate,
            upload=upload,
            report=report,
            manifest=manifest,
            **extra,
        )
    except BaseException:
        blob_remove(created)
        raise


def model_version_derive(
    *,
    source: ModelVersion,
    actor,
    config_text: str | None = None,
    config_patch: dict[str, Any] | None = None,
    provenance: Provenance = Provenance(),
) -> ModelVersion:
    """Register the model's next version with `source`'s files and a changed config: the
    whole new `config_text`, or `config_patch` (top-level fields replacing the source's,
    integrations/triton/model_config/patch.py). Checked as an upload is (Triton's schema,
    backends, the python model file); the files are the stored blobs, never copied. A config
    that Triton reads as the source's (only layout or comments differ) is refused with 409,
    and so is one equal to another version's config (that version named). Members of the
    model's team only; audited as a registration naming its source."""
    model = source.model
    team_write_check(
        actor=actor, team=model.team, what=f"Deriving a version of model '{model.name}'"
    )
    field = "config_text" if config_patch is None else "config_patch"
    text = _derived_config_text(source, config_text, config_patch)
    files, encoded = _stored_files(source), text.encode()
    staging = Staging()
    try:
        upload = ExtractedUpload(
            config_text=text,
            config=staging.write(
                io.BytesIO(encoded), path=CONFIG_NAME, role="config", max_bytes=len(encoded)
            ),
            files=files,  # already in the blob store: commit only touches them
            source_version_folder=source.validation.get("source_version_folder"),
            staging=staging,
        )
        report = _upload_checked(model, upload)
        if config_to_dict(report.config) == source.config_json:
            raise RegistryError(
                f"The config is version {source.version}'s as Triton reads it (only layout or "
                "comments differ): change a field to make a new version.",
                field=field,
                status=409,
            )
        try:
            return _stored_version(
                model=model,
                actor=actor,
                provenance=provenance,
                refuse_duplicate=True,
                upload=upload,
                report=report,
                derived_from=source,
            )
        except DuplicateVersion as exc:
            found = exc.version
            message = (
                f"These files with this config are already version {found.version} "
                f"('{found.label}') of {model.name}."
            )
            raise RegistryError(message, field=field, status=409) from None
    finally:
        staging.discard()


def _derived_config_text(
    source: ModelVersion, config_text: str | None, config_patch: dict[str, Any] | None
) -> str:
    """The new config's text: given whole, or the source's with the patch applied."""
    if (config_text is None) == (config_patch is None):
        raise RegistryError("Give either config_text or config_patch.", field="config_text")
    if config_patch is not None:
        try:
            config_text = config_patched(source.config_text, config_patch)
        except PatchError as exc:
            raise RegistryError(str(exc), field="config_patch") from None
    if len(config_text.encode()) > MAX_CONFIG_BYTES:
        raise RegistryError("config.pbtxt is larger than 1 MiB", field="config_text")
    return config_text


def _stored_files(version: ModelVersion) -> list[StagedFile]:
    """The version's files (not its config) as the blobs that hold them; 409 when a blob is
    gone from storage (nothing can be made of a version whose files are lost)."""
    out = []
    for entry in version.manifest:
        if entry["role"] == "config":
            continue
        stored = blob_path(entry["sha256"])
        if not stored.is_file():
            raise RegistryError(
                f"{entry['path']} of version {version.version} is missing from storage.",
                status=409,
            )
        out.append(
            StagedFile(
                path=entry["path"],
                role=entry["role"],
                size=entry["size"],
                sha256=entry["sha256"],
                staged_at=stored,
            )
        )
    return out


def _upload_checked(model: Model, upload) -> ConfigReport:
    """The config's report once the config and the files (as untrusted code) pass; else
    RegistryError listing every error with its file (and line where there is one)."""
    custom = custom_backends()
    report = validate_model_config(
        upload.config_text,
        model_name=model.name,
        version_files=[f.path for f in upload.files],
        known_models=Model.objects.values_list("name", flat=True),
        server_version=settings.SWITCHYARD_TRITON_TARGET_VERSION,
        max_elements=settings.SWITCHYARD_MAX_TENSOR_ELEMENTS,
        allowed_backends=allowed_backends(),
        custom_backends=custom,
    )
    errors = list(report.errors)
    if report.config is not None:
        errors += upload_code_issues(upload, report.config, custom=custom)
    if errors:
        found = [issue.as_dict() for issue in errors]
        raise RegistryError(found[0]["message"], errors=found)
    return report


def _archive_limits() -> ArchiveLimits:
    return ArchiveLimits(
        max_entries=settings.SWITCHYARD_MAX_ARCHIVE_FILES,
        max_unpacked_bytes=settings.SWITCHYARD_MAX_UNPACKED_BYTES,
        max_ratio=settings.SWITCHYARD_MAX_COMPRESSION_RATIO,
        max_header_bytes=settings.SWITCHYARD_MAX_ARCHIVE_HEADER_BYTES,
    )


def _archive_error(exc: ArchiveRefused) -> dict:
    return {**({"file": exc.file} if exc.file else {}), "message": exc.message}


def _version_save(
    *, model, actor, provenance, refuse_duplicate, upload, report, manifest, derived_from=None
) -> ModelVersion:
    with transaction.atomic():
        locked = Model.objects.select_for_update().get(pk=model.pk)
        number = locked.next_version
        locked.next_version = number + 1
        locked.save(update_fields=["next_version", "updated_at"])
        label = provenance.label or f"v{number}"
        if ModelVersion.objects.filter(model=locked, label=label).exists():
            raise RegistryError(
                f"Label '{label}' is already used by another version of {model.name}.",
                field="label",
                status=409,
            )
        duplicate = ModelVersion.objects.filter(model=locked, digest=manifest_digest(manifest))
        if refuse_duplicate and (found := duplicate.select_related("model").first()):
            raise DuplicateVersion(found)
        version = ModelVersion(
            model=locked,
            version=number,
            label=label,
            config_text=upload.config_text,
            config_json=config_to_dict(report.config),
            manifest=manifest,
            digest=manifest_digest(manifest),
            size_bytes=sum(e["size"] for e in manifest),
            validation={**report.as_dict(), "source_version_folder": upload.source_version_folder},
            source_commit=provenance.source_commit,
            training_run_url=provenance.training_run_url,
            notes=provenance.notes,
            derived_from=derived_from,
            created_by=actor,
        )
        _full_clean(version, validate_unique=False, exclude=["created_by", "model", "derived_from"])
        version.save()
        audit_record(
            actor=actor,
            action="model_version.registered",
            obj=version,
            details={
                "digest": version.digest,
                "label": label,
                "warnings": len(report.warnings),
                **({"derived_from": derived_from.version} if derived_from else {}),
            },
        )
        transaction.on_commit(
            lambda: version_registered.send(sender=ModelVersion, version_id=version.pk)
        )
    return version


def alias_set(
    *, model: Model, name: str, version: ModelVersion, actor, release_id: int | None = None
) -> Alias:
    """Point an alias at a version of the same model; every move is kept; audited.

    Members of the model's team only. `production` moves only by the release that promotes
    (`release_id`) while a release of the model is active: anyone else gets 409.
    """
    if version.model_id != model.pk:
        raise RegistryError("The version belongs to another model.", field="version")
    team_write_check(actor=actor, team=model.team, what=f"Moving an alias of model '{model.name}'")
    with transaction.atomic():
        # The model row lock orders this move with release_create, which locks it too.
        Model.objects.select_for_update().filter(pk=model.pk).first()
        alias = Alias.objects.select_for_update().filter(model=model, name=name).first()
        previous = alias.version if alias else None
        if alias is None:
            alias = Alias(model=model, name=name, version=version)
            _full_clean(alias, validate_unique=False, exclude=["model", "version"])
        elif previous.pk == version.pk:
            return alias
        if name == PRODUCTION_ALIAS:
            protected_change.send(
                sender=Model, model=model, change="production_alias", release_id=release_id
            )
        alias.version = version
        alias.save()
        AliasMove.objects.create(
            alias=alias, from_version=previous, to_version=version, moved_by=actor
        )
        audit_record(
            actor=actor,
            action="alias.moved",
            obj=alias,
            details={"from": previous.version if previous else None, "to": version.version},
        )
    return alias


def model_version_delete(*, version: ModelVersion, actor) -> None:
    """Delete a version that serves nowhere and has no alias; its number is never reused.

    Members of the model's team only.
    """
    from django.db.models import ProtectedError

    team_write_check(
        actor=actor, team=version.model.team, what=f"Deleting a version of '{version.model.name}'"
    )
    label = str(version)
    try:
        with transaction.atomic():
            audit_record(
                actor=actor,
                action="model_version.deleted",
                obj=version,
                details={"digest": version.digest},
            )
            version.delete()
    except ProtectedError as exc:
        raise _in_use(label, exc, field="version") from None


def _model_delete_refusal(model: Model) -> str | None:
    """Why `model` must stay: a version serves, or it ever went to a production cluster.

    Reads the apps above through their reverse relations only (no imports upwards).
    """
    serving = ModelVersion.objects.filter(model=model, serving__isnull=False).first()
    if serving is not None:
        return f"Version {serving.version} of '{model.name}' still serves; unload it first."
    production = "production"
    if model.deployments.filter(cluster__environment=production).exists() or (
        model.releases.filter(cluster__environment=production).exists()
    ):
        return f"'{model.name}' has been deployed to a production cluster; it is kept for audit."
    return None


def model_delete(*, model: Model, actor) -> None:
    """Delete a model that never served in production, with its versions and history; audited.

    Refused (409) while any version serves or when it was ever deployed or released to a
    production cluster. Its staging deployments, ended releases, benchmarks and aliases go
    with it; stored files are left to `storage_sweep`. Members of the model's team only.
    """
    from django.db.models import ProtectedError

    team_write_check(actor=actor, team=model.team, what=f"Deleting model '{model.name}'")
    with transaction.atomic():
        locked = Model.objects.select_for_update().get(pk=model.pk)
        if reason := _model_delete_refusal(locked):
            raise RegistryError(reason, field="name", status=409)
        versions = list(locked.versions.values_list("version", flat=True))
        audit_record(
            actor=actor,
            action="model.deleted",
            obj=locked,
            details={"team": locked.team.name, "versions": versions},
        )
        try:
            for related in (locked.releases, locked.deployments, locked.serving, locked.aliases):
                related.all().delete()
            locked.versions.all().delete()
            locked.delete()
        except ProtectedError as exc:
            raise _in_use(f"'{model.name}'", exc, field="name") from None


@dataclass(frozen=True)
class StorageSweep:
    """What a sweep removed (or, dry, would remove) and what it kept."""

    blobs_removed: int
    bytes_freed: int
    blobs_kept: int
    staging_removed: int
    dry_run: bool


def storage_sweep(*, grace_s: float | None = None, dry_run: bool = False) -> StorageSweep:
    """Remove stored files no version references any more, and abandoned upload folders.

    Blobs are shared by content, so one goes only when no remaining version's manifest names
    it. Anything touched within `grace_s` stays: an upload in progress stages its files and
    publishes its blobs (touching those it shares) before its version row commits.
    Audited when something was removed.
    """
    grace_s = settings.SWITCHYARD_STORAGE_SWEEP_GRACE_S if grace_s is None else grace_s
    cutoff = time.time() - grace_s
    referenced = {
        entry["sha256"]
        for manifest in ModelVersion.objects.values_list("manifest", flat=True).iterator()
        for entry in manifest
    }
    removed = freed = kept = 0
    for sha256, path in stored_blobs():
        try:
            stat = path.stat()
        except FileNotFoundError:
            continue
        if sha256 in referenced or stat.st_mtime >= cutoff:
            kept += 1
            continue
        if not dry_run:
            path.unlink(missing_ok=True)
        removed, freed = removed + 1, freed + stat.st_size
    stale = [p for p in staging_folders() if _newest_mtime(p) < cutoff]
    if not dry_run:
        for folder in stale:
            shutil.rmtree(folder, ignore_errors=True)
    sweep = StorageSweep(removed, freed, kept, len(stale), dry_run)
    if not dry_run and (removed or stale):
        audit_record(
            actor=None,
            action="storage.swept",
            details={
                "blobs_removed": removed,
                "bytes_freed": freed,
                "staging_removed": len(stale),
            },
        )
    return sweep


def _newest_mtime(folder) -> float:
    """The newest mtime in an upload's staging folder (an upload writes as it goes)."""
    times = [folder.stat().st_mtime]
    times += [p.stat().st_mtime for p in folder.rglob("*") if p.exists()]
    return max(times)


def _in_use(label: str, exc: Exception, *, field: str) -> RegistryError:
    """409 naming up to five of the rows that still use what was to be deleted."""
    users = sorted({str(obj) for obj in getattr(exc, "protected_objects", ())})[:5]
    return RegistryError(f"{label} cannot be deleted: {'; '.join(users)}.", field=field, status=409)
