"""Push one version to 4 real Triton nodes vs loading the same files directly, in one run.

Prints (goal from the issue):
* push time / direct parallel load time on the same 4 nodes (goal at most 1.15);
* push time / one node's direct load time (sequential pushing would be about 4).

The push is Switchyard's deployment (plan with re-hashed files, fan-out, READY wait and one
warm-up inference per node); the floor is tritonclient gRPC loads of the same config and
files sent to the 4 nodes at once from threads. Each measurement loads a fresh model name
(never a no-op reload) and is repeated; the medians are compared.
Usage: .venv/bin/python bench/push_fleet.py [rounds]
"""

import io
import os
import statistics
import sys
import tarfile
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings.dev")
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/switchyard_bench")


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


def _direct_load(node, name: str, plan) -> float:
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(node.grpc_url)
    try:
        start = time.perf_counter()
        client.load_model(
            name,
            config=plan.config_json,
            files={f"file:{k}": v for k, v in plan.files.items()},
            client_timeout=120,
        )
        return time.perf_counter() - start
    finally:
        client.close()


def main(rounds: int) -> None:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.db import connection

    test_db = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    from deployments import push
    from deployments.executor import deployment_run
    from deployments.services import cluster_create, deployment_create, node_create
    from integrations.triton.local import start_cluster
    from models_registry.services import model_create, model_version_register, team_create

    try:
        with tempfile.TemporaryDirectory() as work, start_cluster(4, Path(work)) as fleet:
            from django.conf import settings

            settings.SWITCHYARD_STORAGE_ROOT = Path(work) / "artifacts"
            user = get_user_model().objects.create(username="bench", is_superuser=True)
            team_create(name="bench", actor=user)
            cluster = cluster_create(actor=user, name="bench", environment="staging")
            for node in fleet.nodes:
                node_create(
                    cluster=cluster,
                    actor=user,
                    name=node.name,
                    http_url=node.http_url,
                    grpc_url=node.grpc_url,
                )
            pushes, parallel, single = [], [], []
            for i in range(rounds):
                name = f"push_{i}"
                model = model_create(name=name, team="bench", actor=user)
                version = model_version_register(model=model, archive=_archive(name), actor=user)
                start = time.perf_counter()
                done = deployment_run(
                    deployment_id=deployment_create(cluster=cluster, version=version, actor=user).pk
                )
                pushes.append(time.perf_counter() - start)
                assert done.status == "succeeded", done.error
                plan = push.build_plan([version], upload=True)
                direct = f"direct_{i}"
                import json

                config = json.loads(plan.config_json)
                config["name"] = direct
                plan.config_json = json.dumps(config)
                with ThreadPoolExecutor(4) as pool:
                    start = time.perf_counter()
                    list(pool.map(_direct_load, fleet.nodes, [direct] * 4, [plan] * 4))
                    parallel.append(time.perf_counter() - start)
                config["name"] = f"single_{i}"
                plan.config_json = json.dumps(config)
                single.append(_direct_load(fleet.nodes[0], f"single_{i}", plan))
            p, d, s = (statistics.median(x) for x in (pushes, parallel, single))
            print(
                f"rounds: {rounds}; median push {p * 1000:.0f} ms, direct parallel on 4 nodes "
                f"{d * 1000:.0f} ms, one direct load {s * 1000:.0f} ms"
            )
            print(f"push / direct parallel: {p / d:.2f} (goal <= 1.15)")
            print(f"push / one node's direct load: {p / s:.2f} (sequential would be ~4)")
    finally:
        connection.creation.destroy_test_db(test_db, verbosity=0)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
