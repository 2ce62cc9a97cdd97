"""Run N real local Triton nodes in the foreground; Ctrl-C stops them all."""

import signal
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from integrations.triton.local import TritonLaunchError, start_cluster
from integrations.triton.restricted import NodeKey, NodeKeyError


def _node_key(path: str | None) -> NodeKey | None:
    """The key in `path` under the configured header; CommandError (never the key) if unusable."""
    if path is None:
        return None
    try:
        value = Path(path).read_text().strip()
        return NodeKey(settings.SWITCHYARD_TRITON_KEY_HEADER, value)
    except (OSError, UnicodeError, NodeKeyError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else str(exc)
        raise CommandError(f"--key-file {path}: {why}") from None


class Command(BaseCommand):
    help = "Start local tritonserver nodes (explicit model control, loopback only) and wait."

    def add_arguments(self, parser):
        parser.add_argument("--nodes", type=int, default=2, help="how many nodes (default 2)")
        parser.add_argument(
            "--base-port",
            type=int,
            default=None,
            help="first port; each node takes three (HTTP, gRPC, metrics). Default: free ports",
        )
        parser.add_argument(
            "--work-dir",
            default=None,
            help="where repositories and logs go (default: $SWITCHYARD_VAR_DIR/triton-local)",
        )
        parser.add_argument("--metrics-interval-ms", type=int, default=1000)
        parser.add_argument(
            "--key-file",
            default=None,
            help="a file holding the node key: model control, shared memory, trace and "
            "logging then ask for it (header SWITCHYARD_TRITON_KEY_HEADER). Default: open nodes",
        )

    def handle(self, *args, **opts):
        work_dir = Path(opts["work_dir"] or settings.SWITCHYARD_VAR_DIR / "triton-local")
        try:
            cluster = start_cluster(
                opts["nodes"],
                work_dir,
                base_port=opts["base_port"],
                metrics_interval_ms=opts["metrics_interval_ms"],
                node_key=_node_key(opts["key_file"]),
            )
        except TritonLaunchError as exc:
            raise CommandError(str(exc)) from None
        stop = {"requested": False}

        def _request_stop(signum, frame):
            stop["requested"] = True

        signal.signal(signal.SIGTERM, _request_stop)
        signal.signal(signal.SIGINT, _request_stop)
        try:
            for node in cluster.nodes:
                self.stdout.write(
                    f"{node.name}: http {node.http_url}  grpc {node.grpc_url}  "
                    f"metrics {node.metrics_url}  log {node.log_path}"
                )
            access = "restricted to the key" if cluster.node_key else "open to anyone"
            self.stdout.write(f"Triton nodes are ready, model control {access}. Ctrl-C stops them.")
            self.stdout.flush()
            while not stop["requested"]:
                dead = [n for n in cluster.nodes if not n.is_running()]
                if dead:
                    raise CommandError(
                        f"Triton node '{dead[0].name}' stopped unexpectedly; "
                        f"log {dead[0].log_path}:\n{dead[0].log_tail()}"
                    )
                time.sleep(0.5)
        finally:
            cluster.stop()
            self.stdout.write("Triton nodes stopped.")
