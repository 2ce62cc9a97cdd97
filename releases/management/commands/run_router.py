"""Run a cluster's nginx router in the foreground (for `make demo`); Ctrl-C stops it."""

import signal
import threading
import time

from django.core.management.base import BaseCommand, CommandError

from deployments.models import TritonCluster
from deployments.validation import cluster_router
from integrations.routers import RouterError
from integrations.routers.settings import RouterSettingsError
from releases.effects import current_routes
from releases.routing import router_for, router_state


def _driver(cluster: TritonCluster) -> str:
    """The cluster's router driver; CommandError naming the key when its settings are junk."""
    try:
        return cluster_router(cluster).driver
    except RouterSettingsError as exc:
        raise CommandError(f"Cluster {cluster.name}: {exc.field}: {exc.message}") from None


class Command(BaseCommand):
    help = "Start the cluster's router with the routes of its active releases; stop it on exit."

    def add_arguments(self, parser):
        parser.add_argument("--cluster", required=True)
        parser.add_argument(
            "--wait",
            type=float,
            default=0.0,
            help="wait up to N s for the cluster and its nodes to be registered",
        )

    def handle(self, *args, **opts):
        deadline = time.monotonic() + opts["wait"]
        while True:
            cluster = TritonCluster.objects.filter(name=opts["cluster"]).first()
            ready = cluster is not None and _driver(cluster) == "nginx"
            # Nodes may be registered just after their cluster: wait for them as well.
            if ready and (cluster.nodes.exists() or time.monotonic() >= deadline):
                break
            if time.monotonic() >= deadline:
                raise CommandError(f"No cluster named '{opts['cluster']}' with an nginx router.")
            time.sleep(1)
        if not cluster.nodes.exists():
            self.stderr.write(f"{cluster.name} has no nodes: the router answers 503 until then.")
        try:
            router = router_for(cluster)
        except RouterError as exc:
            raise CommandError(str(exc)) from None
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        try:
            router.apply(router_state(cluster, current_routes(cluster), router.current()))
            grpc = getattr(router, "grpc_listen", "")
            self.stdout.write(
                f"router for {cluster.name} listening on {router.listen}"
                f" (clients send to {cluster_router(cluster).url})"
                + (f"; gRPC on {grpc}, passed through, not split by version" if grpc else "")
            )
            self.stdout.flush()
            stop.wait()
        except RouterError as exc:
            raise CommandError(str(exc)) from None
        finally:
            router.stop()
            self.stdout.write("router stopped")
