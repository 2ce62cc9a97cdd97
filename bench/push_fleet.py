"""Push one version to 4 real Triton nodes vs loading the same files directly, in one run.

Prints (goal from the issue):
* push time / direct parallel load time on the same 4 nodes (goal at most 1.15);
* push time / one node's direct load time (sequential pushing would be about 4);
* push time / the mandated work done with bare tritonclient (the floor, see below).

The push is Switchyard's deployment (plan with re-hashed files, fan-out, loads whose config
carries a Triton-native warm-up of every instance, READY wait and one warm-up inference per
node, per-node outcomes written); the denominator is tritonclient gRPC loads of the
registered config (without that native warm-up) and the same files, sent to the 4 nodes at
once from threads. The floor does what the issue mandates per node with bare tritonclient
(load of the registered config, READY of the version, one warm-up inference with the same
smallest input) on the same 4 nodes at once: what is left between the push and the floor is
Switchyard's own overhead.

Each measurement loads a fresh model name (never a no-op reload). The order of the
measurements rotates from round to round, and each round's models are unloaded and their
stubs given time to exit before the next round, so no side works on a busier machine than
the other. Prints the medians and the per-round ratios (median, lowest and highest).
Usage: .venv/bin/python bench/push_fleet.py [rounds]
"""

import io
import json
import os
import statistics
import sys
import tarfile
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings.dev")
from bench.common import bench_node_key, drop_queued_tasks, use_bench_queue  # noqa: E402

use_bench_queue()
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/switchyard_bench")

# An unloaded python model's stub takes ~1.1-1.2 s to exit (docs/TRITON.md §api): let it finish
# before the next round is timed.
SETTLE_S = 1.5
KINDS = ("push", "parallel", "floor", "single")


def _archive(name: str) -> io.BytesIO:
    root = ROOT / "examples/model_repository/risk_score"
    config = (root / "config.pbtxt").read_text().replace('name: "risk_score"', f'name: "{name}"')
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for arcname, data in (
            ("config.pbtxt", config.encode()),
            ("1/model.py", (root / "2/model.py").read_bytes()),
            ("1/weights.npz", (root / "2/weights.npz").read_bytes()),
        ):
            info = tarfile.TarInfo(arcname)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    buf.seek(0)
    return buf


def _bare(plan, name: str):
    """The plan as anyone would load it by hand: the registered config under `name`, without
    the native warm-up a push adds (and its `warmup/` input files)."""
    config = json.loads(plan.config_json)
    config["name"] = name
    config.pop("model_warmup", None)
    files = {k: v for k, v in plan.files.items() if not k.startswith("warmup/")}
    return replace(plan, model=name, config_json=json.dumps(config), files=files)


def _direct(node, plan, warm: bool) -> float:
    """A bare tritonclient load (and with `warm`, READY and one warm-up inference)."""
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import np_to_triton_dtype

    from deployments.push import warmup_inputs

    client = grpcclient.InferenceServerClient(node.grpc_url)
    try:
        start = time.perf_counter()
        client.load_model(
            plan.model,
            config=plan.config_json,
            files={f"file:{k}": v for k, v in plan.files.items()},
            headers=node.node_key.grpc_headers(),
            client_timeout=120,
        )
        if warm:
            version = str(plan.versions[-1])
            assert client.is_model_ready(plan.model, version)
            tensors = []
            for name, array in warmup_inputs(plan.config_dict).items():
                dtype = np_to_triton_dtype(array.dtype)
                tensor = grpcclient.InferInput(name, list(array.shape), dtype)
                tensor.set_data_from_numpy(array)
                tensors.append(tensor)
            client.infer(plan.model, tensors, model_version=version)
        return time.perf_counter() - start
    finally:
        client.close()


def _parallel(nodes, plan, *, warm: bool) -> float:
    with ThreadPoolExecutor(len(nodes)) as pool:
        start = time.perf_counter()
        list(pool.map(lambda node: _direct(node, plan, warm), nodes))
        return time.perf_counter() - start


def _push(cluster, version, user) -> float:
    from deployments.executor import deployment_run
    from deployments.services import deployment_create

    deployment = deployment_create(cluster=cluster, version=version, actor=user)
    start = time.perf_counter()
    done = deployment_run(deployment_id=deployment.pk)
    elapsed = time.perf_counter() - start
    assert done.status == "succeeded", done.error
    return elapsed


def _unload(nodes, names: list[str]) -> None:
    import tritonclient.grpc as grpcclient

    for node in nodes:
        client = grpcclient.InferenceServerClient(node.grpc_url)
        try:
            for name in names:
                client.unload_model(name, headers=node.node_key.grpc_headers())
        finally:
            client.close()
    time.sleep(SETTLE_S)


def _round(i: int, fleet, cluster, user) -> dict[str, float]:
    from deployments import push
    from models_registry.services import model_create, model_version_register

    name = f"push_{i}"
    model = model_create(name=name, team="bench", actor=user)
    version = model_version_register(model=model, archive=_archive(name), actor=user)
    plan = push.build_plan([version], upload=True)
    times = {}
    for kind in KINDS[i % len(KINDS) :] + KINDS[: i % len(KINDS)]:
        time.sleep(0.2)
        if kind == "push":
            times[kind] = _push(cluster, version, user)
        elif kind == "single":
            times[kind] = _direct(fleet.nodes[0], _bare(plan, f"single_{i}"), False)
        else:
            times[kind] = _parallel(fleet.nodes, _bare(plan, f"{kind}_{i}"), warm=kind == "floor")
    _unload(fleet.nodes, [name, f"parallel_{i}", f"floor_{i}"])
    _unload(fleet.nodes[:1], [f"single_{i}"])
    shown = ", ".join(f"{kind} {times[kind] * 1000:.0f} ms" for kind in KINDS)
    print(f"round {i + 1}: {shown}; push / direct parallel {times['push'] / times['parallel']:.2f}")
    return times


def _report(rounds: list[dict[str, float]]) -> None:
    med = {k: statistics.median(r[k] for r in rounds) for k in KINDS}
    print(
        f"rounds: {len(rounds)}; median push {med['push'] * 1000:.0f} ms, direct parallel on "
        f"4 nodes {med['parallel'] * 1000:.0f} ms, floor (bare load + READY + warm-up on 4 "
        f"nodes) {med['floor'] * 1000:.0f} ms, one direct load {med['single'] * 1000:.0f} ms"
    )
    for label, kind, note in (
        ("push / direct parallel", "parallel", "goal <= 1.15"),
        ("push / one node's direct load", "single", "sequential would be ~4"),
        ("floor / direct parallel", "parallel", "what the mandated warm-up costs"),
        ("push / floor", "floor", "Switchyard's own overhead"),
    ):
        numerator = "floor" if label.startswith("floor") else "push"
        ratios = sorted(r[numerator] / r[kind] for r in rounds)
        print(
            f"{label}: {med[numerator] / med[kind]:.2f} ({note}); per round median "
            f"{statistics.median(ratios):.2f}, range {ratios[0]:.2f}-{ratios[-1]:.2f}"
        )


def main(rounds: int) -> None:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.db import connection

    test_db = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    from deployments.services import cluster_create, node_create
    from integrations.triton.local import start_cluster
    from models_registry.services import team_create

    try:
        with (
            tempfile.TemporaryDirectory() as work,
            start_cluster(4, Path(work), node_key=bench_node_key()) as fleet,
        ):
            from django.conf import settings

            settings.SWITCHYARD_STORAGE_ROOT = Path(work) / "artifacts"
            user = get_user_model().objects.create(username="bench", is_superuser=True)
            team_create(name="bench", actor=user)
            cluster = cluster_create(
                actor=user, name="bench", environment="staging", api_key=fleet.node_key.value
            )
            for node in fleet.nodes:
                node_create(
                    cluster=cluster,
                    actor=user,
                    name=node.name,
                    http_url=node.http_url,
                    grpc_url=node.grpc_url,
                )
            _report([_round(i, fleet, cluster, user) for i in range(rounds)])
    finally:
        connection.creation.destroy_test_db(test_db, verbosity=0)
        drop_queued_tasks()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 8)
