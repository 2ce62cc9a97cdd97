"""What to load on a node for a serving set, and loading or unloading it on one node.

No database writes here: services read rows, build a LoadPlan (deployments/serving.py),
call these functions outside any transaction, and record the outcomes. Facts relied on
(docs/TRITON.md §api, §versions): one config per model (the highest served version's config
applies to all), `version_policy: specific` chooses the versions, an identical config with
identical files is a no-op (so re-applying is idempotent), a change of `version_policy`
alone keeps the versions that stay (see push_id_for), load is synchronous, and a failed load
leaves the previous copy serving.
"""

import hashlib
import logging
import posixpath
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from django.conf import settings
from google.protobuf import json_format, text_format
from tritonclient.grpc import model_config_pb2

from deployments import own_traffic
from deployments.memory_watch import memory_watched
from deployments.node_keys import NodeKeyUnavailable, cluster_node_key
from deployments.validation import node_urls_check, repository_open, tensor_limits
from integrations.paths import PathError, SafeDir, is_plain_name
from integrations.triton.client import TritonClient
from integrations.triton.errors import PermanentTritonError, TritonError
from integrations.triton.inputs import generate_inputs
from integrations.triton.memory import load_refusal, node_memory
from integrations.triton.model_config import add_native_warmup, config_for_serving
from integrations.triton.stream import is_decoupled
from models_registry.models import ModelVersion
from models_registry.storage import CHUNK, blob_open, manifest_digest

logger = logging.getLogger(__name__)


class CorruptArtifact(Exception):
    """A stored file no longer matches its recorded hash; nothing may be loaded from it."""


class RepositoryRefused(CorruptArtifact):
    """The cluster's repository folder is outside SWITCHYARD_REPOSITORY_ROOTS: nothing is
    written or removed there (caught where a corrupt artifact is: refused before any load)."""


@dataclass
class LoadPlan:
    model: str
    versions: list[int]
    config_json: str
    config_dict: dict
    files: dict[str, bytes] | None = None  # upload mode: "<version>/<path>" -> bytes
    push_id: str = ""
    # The native warm-up's input files by model-dir path ("warmup/<file>"); in upload mode
    # they are also in `files`, in filesystem mode materialize() writes them.
    warmup_files: dict[str, bytes] = field(default_factory=dict)
    # Bytes of each version's files: what a node must at least find free to load it.
    sizes: dict[int, int] = field(default_factory=dict)


@dataclass
class NodeOutcome:
    ok: bool
    load_ms: float | None = None
    warmup_ms: float | None = None
    error: str = ""
    extra: dict = field(default_factory=dict)


def push_id_for(versions: Sequence[ModelVersion]) -> str:
    """One id per registered model, the same whichever versions are served.

    It marks a copy as Switchyard's: the first push over a copy loaded by anything else
    (same name, same version numbers, no or another id) changes the config and so reloads
    it. It must not depend on the served set: when a load changes only `version_policy`,
    Triton keeps the versions that stay READY and starts only the added ones (measured on
    2.51 in upload mode: adding a canary left the baseline's stub running), while any other
    config change reloads every version, which would restart the baseline under live
    traffic at each release step. Version files never change after registration, so the
    set of digests adds nothing here.
    """
    model = versions[0].model
    return hashlib.sha256(f"switchyard:{model.pk}:{model.name}".encode()).hexdigest()[:16]


def _verified_bytes(entry: dict, blobs: dict[str, bytes] | None = None) -> bytes:
    """The stored file's bytes once they match its sha256; `blobs` caches them for a push."""
    if blobs is not None and entry["sha256"] in blobs:
        return blobs[entry["sha256"]]
    digest, parts = hashlib.sha256(), []
    try:
        handle = blob_open(entry["sha256"])
    except FileNotFoundError:
        raise CorruptArtifact(f"stored file {entry['path']} is missing from storage") from None
    with handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
            parts.append(chunk)
    if digest.hexdigest() != entry["sha256"]:
        raise CorruptArtifact(f"stored file {entry['path']} does not match its sha256")
    data = b"".join(parts)
    if blobs is not None:
        blobs[entry["sha256"]] = data
    return data


def _serving_config(
    versions: Sequence[ModelVersion],
    push_id: str,
    name: str = "",
    calls_to: dict[str, str] | None = None,
) -> tuple[str, dict, dict[str, bytes]]:
    """(config JSON to load, the config as a dict, the native warm-up's files).

    The config gets a Triton-native warm-up of the push's own warm-up request (where the
    config allows one, see native_warmup_skip_reason): Triton then runs it on every instance
    of every version it loads before that version is READY, so neither a client reaching a
    new version at READY nor an instance the push's one inference did not hit (instance
    count > 1, several GPUs) meets it cold. The sample depends on the config alone, so a
    change of the served set keeps the config equal apart from `version_policy`.
    """
    newest = max(versions, key=lambda v: v.version)
    config = model_config_pb2.ModelConfig()
    json_format.ParseDict(newest.config_json, config)
    config.name = name or newest.model.name
    for step in config.ensemble_scheduling.step:
        if step.model_name in (calls_to or {}):  # a caller's sibling calls the candidate's
            step.model_name, step.model_version = calls_to[step.model_name], -1
    config_dict = json_format.MessageToDict(config, preserving_proto_field_name=True)
    try:
        sample = warmup_inputs(config_dict)
    except ValueError:  # the push's own warm-up reports it; nothing to warm natively
        sample = {}
    warmup_files = add_native_warmup(config, sample)
    text = config_for_serving(config, versions=[v.version for v in versions], push_id=push_id)
    return text, config_dict, warmup_files


def build_plan(
    versions: Sequence[ModelVersion],
    *,
    upload: bool,
    blobs: dict[str, bytes] | None = None,
    name: str = "",
    calls_to: dict[str, str] | None = None,
) -> LoadPlan:
    """The load for exactly these versions; every stored file is re-hashed first.

    Plans of one push may share `blobs` (sha256 -> verified bytes): a file re-hashed for one
    of them is not read again for the next (e.g. the retire after the staged load). `name`
    serves them under another model name (a config canary's sibling,
    deployments/temporary.py), with the newest version's config as its own. `calls_to`
    (an ensemble's step model -> the name to call instead) points those steps at another
    name, at its only version (a graph release: the caller's sibling calls the candidate's).
    """
    versions = sorted(versions, key=lambda v: v.version)
    push_id = push_id_for(versions)
    config_json, config_dict, warmup_files = _serving_config(versions, push_id, name, calls_to)
    files: dict[str, bytes] | None = dict(warmup_files) if upload else None
    for version in versions:
        if manifest_digest(version.manifest) != version.digest:
            raise CorruptArtifact(f"{version} manifest does not match its digest")
        for entry in version.files():
            data = _verified_bytes(entry, blobs)
            if files is not None:
                files[f"{version.version}/{entry['path']}"] = data
        if files is not None and not version.files():
            # A version of no files (an ensemble's) still needs its folder for Triton to see
            # it: the digest marker the filesystem mode writes there too.
            files[f"{version.version}/.switchyard-digest"] = version.digest.encode()
    return LoadPlan(
        model=name or versions[0].model.name,
        versions=[v.version for v in versions],
        config_json=config_json,
        config_dict=config_dict,
        files=files,
        push_id=push_id,
        warmup_files=warmup_files,
        sizes={v.version: sum(int(e.get("size") or 0) for e in v.files()) for v in versions},
    )


def materialize(repository: str, versions: Sequence[ModelVersion], plan: LoadPlan) -> None:
    """Filesystem mode: write each version folder atomically (temp folder, then rename).

    The repository is checked under SWITCHYARD_REPOSITORY_ROOTS and every folder below it is
    opened by descriptor without following a symbolic link, so a link planted there (by
    model code on a node sharing the folder) cannot lead a write or a removal outside it:
    the push fails with RepositoryRefused naming the path, before anything is written there.
    """
    if not is_plain_name(plan.model):
        raise RepositoryRefused(f"model name {plan.model!r} is not a plain folder name")
    try:
        with repository_open(repository) as root, root.child(plan.model) as model_dir:
            for version in versions:
                _write_version(model_dir, version)
            for relpath, data in plan.warmup_files.items():
                _write_if_changed(model_dir, relpath, data)
            config = model_config_pb2.ModelConfig()
            json_format.Parse(plan.config_json, config)
            text = text_format.MessageToString(config).encode()
            tmp_config = f".config-{uuid.uuid4().hex[:8]}"
            model_dir.write(tmp_config, text)
            model_dir.replace(tmp_config, "config.pbtxt")
    except PathError as exc:
        raise RepositoryRefused(f"repository_path: {exc}") from None


def _write_version(model_dir: SafeDir, version: ModelVersion) -> None:
    """The version's folder, written in a temp folder and renamed over the old one; left
    alone when its digest marker already matches."""
    name = str(version.version)
    if model_dir.read(f"{name}/.switchyard-digest") == version.digest.encode():
        return
    tmp = f".tmp-{name}-{uuid.uuid4().hex[:8]}"
    with model_dir.child(tmp) as folder:
        for entry in version.files():
            folder.write(entry["path"], _verified_bytes(entry))
        for place in _bytecode_folders([e["path"] for e in version.files()]):
            folder.write(posixpath.join(place, "__pycache__"), b"")
        folder.write(".switchyard-digest", version.digest.encode())
    model_dir.remove_tree(name)
    model_dir.replace(tmp, name)


def _write_if_changed(folder: SafeDir, relpath: str, data: bytes) -> None:
    """Replace `relpath` atomically with `data`, leaving it (and its mtime) alone when equal."""
    if folder.read(relpath) == data:
        return
    *parents, name = relpath.split("/")
    tmp = "/".join([*parents, f".tmp-{name}-{uuid.uuid4().hex[:8]}"])
    folder.write(tmp, data)
    if not parents:
        return folder.replace(tmp.split("/")[-1], name)
    with folder.child("/".join(parents)) as parent:
        parent.replace(tmp.split("/")[-1], name)
    return None


def _bytecode_folders(paths: Sequence[str]) -> set[str]:
    """Folders of a version where Python would write `__pycache__/` (they hold .py files and
    ship no `__pycache__` of their own).

    materialize() puts an empty *file* named `__pycache__` there, so the python backend's
    stub cannot write bytecode (Python skips the write when the folder cannot be made). If
    it could, Triton would see files newer than its last load and restart that version at
    the next change of the serving set (measured: adding a canary restarted the baseline,
    retiring the baseline restarted the candidate; with the placeholder neither).
    """
    folders = {posixpath.dirname(p) for p in paths if p.endswith(".py")}
    shipped = {posixpath.dirname(posixpath.dirname(p)) for p in paths if "__pycache__/" in p}
    return {f for f in folders if f not in shipped}


def client_for(node) -> TritonClient:
    """A client of the node that sends its cluster's node key on restricted calls (the one
    way to build one); PermanentTritonError (nothing contacted) when a stored address is
    unusable or outside SWITCHYARD_ALLOWED_TARGET_NETWORKS, or the key cannot be read."""
    errors = node_urls_check(http=node.http_url, grpc=node.grpc_url, metrics=node.metrics_url)
    if errors:
        field, message = next(iter(errors.items()))
        raise PermanentTritonError(
            f"Node {node.name}: {field}: {message}", node=str(node.http_url), operation="connect"
        )
    try:
        key = cluster_node_key(node.cluster)
    except NodeKeyUnavailable as exc:
        raise PermanentTritonError(
            f"Node {node.name}: {exc}", node=str(node.http_url), operation="connect"
        ) from None
    return TritonClient(
        node.http_url,
        node.grpc_url or None,
        timeout_s=settings.SWITCHYARD_TRITON_TIMEOUT_S,
        load_timeout_s=settings.SWITCHYARD_TRITON_LOAD_TIMEOUT_S,
        metrics_url=node.metrics_url or None,
        node_key=key,
    )


def warmup_inputs(config_dict: dict) -> dict:
    """The warm-up request (the push's own and the native warm-up's sample): the smallest
    valid request the config allows, batch 1, every variable dim 1."""
    return generate_inputs(config_dict, batch_size=1, variable_dim=1, limits=tensor_limits())


def _ready_successes(client: TritonClient, model: str) -> dict[str, int]:
    """Successful requests of each loaded version of `model` so far ({} when none)."""
    try:
        rows = client.statistics(model)
    except TritonError:  # not loaded
        return {}
    return {
        str(row["version"]): int(row.get("inference_stats", {}).get("success", {}).get("count", 0))
        for row in rows
    }


def _count_native_warmups(node, client: TritonClient, model: str, before: dict) -> None:
    """Triton runs the native warm-up inside the load (one request per instance) and its
    counters count it: a version this load brought up holds only those at READY, counted as
    the control plane's own warm-ups (deployments/own_traffic.py)."""
    for version, n in _ready_successes(client, model).items():
        if version not in before and n > 0:
            own_traffic.own_request_count(
                cluster=node.cluster.name,
                node=node.name,
                model=model,
                version=version,
                origin=own_traffic.WARMUP,
                is_ok=True,
                n=n,
            )


# What Triton answers when it looked for a model on disk and found none.
_POLL_FAILED = "failed to poll from model repository"


def plan_load(
    client: TritonClient, plan: LoadPlan, *, name: str = "", config_json: str = ""
) -> None:
    """client.load of the plan (under `name` with `config_json` when given: a temporary
    model's), and Triton's answer for an ensemble whose steps were uploaded read from
    readiness: Triton looks for the steps in its repository folders, logs that it found
    none and answers INTERNAL "failed to poll from model repository", yet loads the
    ensemble over the steps it has (measured on Triton 2.51, docs/TRITON.md). Then the ensemble's
    versions READY within a moment are the load's success; otherwise its error stands."""
    name = name or plan.model
    try:
        client.load(name, config_json=config_json or plan.config_json, files=plan.files)
    except TritonError as exc:
        if plan.config_dict.get("platform") != "ensemble" or _POLL_FAILED not in str(exc):
            raise
        try:
            client.wait_ready(name, plan.versions, timeout_s=2.0, via_grpc=True)
        except TritonError:
            raise exc from None
        logger.info("%s: Triton answered %r, yet its versions are READY", name, str(exc))


def _memory_refusal(node, client, plan: LoadPlan) -> str | None:
    """Why the node must not load the plan's new versions now: its free memory (Triton's
    gauges) less their files would go under SWITCHYARD_LOAD_MEMORY_RESERVE_BYTES. A second
    copy beside a serving one (a release's candidate) is what this keeps from taking a
    serving node down; versions already loaded there cost nothing more."""
    loaded = client.loaded_models().get(plan.model, set())
    need = sum(size for version, size in plan.sizes.items() if str(version) not in loaded)
    if not need:
        return None
    reading = node_memory(node.http_url, node.metrics_url)
    reserve = settings.SWITCHYARD_LOAD_MEMORY_RESERVE_BYTES
    return load_refusal(reading, need_bytes=need, reserve_bytes=reserve)


@memory_watched("load")
def apply_on_node(node, plan: LoadPlan, *, warm_version: int | None) -> NodeOutcome:
    """Load the plan, wait until every version is READY, warm up one version; never raises.

    All three go over the gRPC channel the load opens: one connection per node and push.
    """
    try:
        with client_for(node) as client:
            refusal = _memory_refusal(node, client, plan)
            if refusal:
                return NodeOutcome(False, error=refusal)
            before = _ready_successes(client, plan.model) if plan.warmup_files else {}
            start = time.perf_counter()
            plan_load(client, plan)
            client.wait_ready(
                plan.model,
                plan.versions,
                timeout_s=settings.SWITCHYARD_TRITON_LOAD_TIMEOUT_S,
                via_grpc=True,
            )
            load_ms = (time.perf_counter() - start) * 1000
            if plan.warmup_files:
                _count_native_warmups(node, client, plan.model, before)
            if warm_version is None:
                return NodeOutcome(True, load_ms)
            # A decoupled model answers over a stream only, which the push's warm-up does not
            # send: its first stream meets it cold (its smoke test streams once).
            if is_decoupled(plan.config_dict):
                return NodeOutcome(True, load_ms, extra={"warmup": "skipped: decoupled"})
            start = time.perf_counter()
            with own_traffic.counted(node, plan.model, warm_version, own_traffic.WARMUP):
                result = client.infer(
                    plan.model, warmup_inputs(plan.config_dict), version=warm_version, via_grpc=True
                )
            warmup_ms = (time.perf_counter() - start) * 1000
            shapes = {k: list(v.shape) for k, v in result.outputs.items()}
            return NodeOutcome(True, load_ms, warmup_ms, extra={"output_shapes": shapes})
    except TritonError as exc:
        return NodeOutcome(False, error=str(exc))
    except Exception as exc:  # a bug or an unexpected library error must not kill the fan-out
        return NodeOutcome(False, error=f"{type(exc).__name__}: {exc}")


@memory_watched("unload")
def unload_on_node(node, model: str) -> NodeOutcome:
    """Unload a model from one node; never raises."""
    try:
        with client_for(node) as client:
            start = time.perf_counter()
            client.unload(model)
            return NodeOutcome(True, load_ms=(time.perf_counter() - start) * 1000)
    except TritonError as exc:
        return NodeOutcome(False, error=str(exc))
