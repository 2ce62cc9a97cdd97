"""The serving set: exactly these versions of one model loaded on every node of a cluster.

The one way Switchyard changes what a cluster serves. Deployments (deployments/executor.py),
reconcile (deployments/reconcile.py) and releases (releases/effects.py) all plan the load
here (every stored file re-hashed; written into the repository in filesystem mode), apply it
on every node at once with a warm-up of one version, and put nodes back when a deployment
fails. No database writes and no transaction: the callers record the desired state and the
outcomes, before or after, as their story needs.
"""

from collections.abc import Callable, Sequence

from deployments import push
from deployments.backends import refuse_unless_allowed
from deployments.models import TritonCluster
from integrations.concurrency import fan_out
from models_registry.models import ModelVersion


class LoadFailed(Exception):
    """The serving set did not load on some nodes; `failures` is {node name: error}, `what`
    the words before them in the message."""

    def __init__(self, failures: dict[str, str], *, what: str = ""):
        self.failures, self.what = failures, what or f"failed on {len(failures)} node(s)"
        listed = "; ".join(f"{name}: {error}" for name, error in failures.items())
        super().__init__(f"{self.what}: {listed}" if listed else self.what)


def serving_plan(
    cluster: TritonCluster,
    versions: Sequence[ModelVersion],
    *,
    blobs: dict | None = None,
    name: str = "",
    calls_to: dict[str, str] | None = None,
) -> push.LoadPlan:
    """The load of exactly `versions` on this cluster (push.CorruptArtifact when a stored file
    fails its hash, RepositoryRefused when the repository folder is not allowed, BackendRefused
    when the cluster does not allow a version's backend), under `name` when given, its
    ensemble steps named in `calls_to` pointed at other names (push.build_plan).

    `blobs` (sha256 -> verified bytes) may be shared by the plans of one push (upload mode).
    """
    refuse_unless_allowed(cluster, versions)
    upload = cluster.push_mode == TritonCluster.PushMode.UPLOAD
    plan = push.build_plan(
        versions, upload=upload, blobs=blobs if upload else None, name=name, calls_to=calls_to
    )
    if not upload:
        push.materialize(cluster.repository_path, versions, plan)
    return plan


def serving_load(
    nodes: Sequence,
    plan: push.LoadPlan,
    *,
    warm_version: int | None,
    while_waiting: Callable[[], None] | None = None,
    on_result: Callable[[object, push.NodeOutcome], None] | None = None,
) -> dict[int, push.NodeOutcome]:
    """Apply `plan` on every node at once, warming `warm_version`; {node.pk: outcome}.
    The callbacks are integrations.concurrency.fan_out's (in the calling thread)."""
    return fan_out(
        nodes,
        lambda node: push.apply_on_node(node, plan, warm_version=warm_version),
        while_waiting=while_waiting,
        on_result=on_result,
    )


def load_failures(nodes: Sequence, outcomes: dict[int, push.NodeOutcome]) -> dict[str, str]:
    """{node name: error} of the nodes whose outcome failed, in the nodes' order."""
    return {n.name: outcomes[n.pk].error for n in nodes if not outcomes[n.pk].ok}


def serving_set_apply(
    *,
    cluster: TritonCluster,
    versions: Sequence[ModelVersion],
    warm_version: int | None = None,
    blobs: dict | None = None,
) -> dict[int, push.NodeOutcome]:
    """Serve exactly `versions` on every node of `cluster` (warming `warm_version`); the
    outcomes by node, or LoadFailed naming every node that did not load them."""
    nodes = list(cluster.nodes.all())
    plan = serving_plan(cluster, versions, blobs=blobs)
    outcomes = serving_load(nodes, plan, warm_version=warm_version)
    failed = load_failures(nodes, outcomes)
    if failed:
        raise LoadFailed(failed)
    return outcomes


def serving_set_revert(
    *,
    cluster: TritonCluster,
    model: str,
    nodes: Sequence,
    previous: Sequence[ModelVersion],
    blobs: dict | None = None,
) -> dict[int, push.NodeOutcome]:
    """Put `nodes` back to serving `previous` (no warm-up), or unload `model` from them
    when it served nothing before; the outcomes by node."""
    if not nodes:
        return {}
    if previous:
        plan = serving_plan(cluster, previous, blobs=blobs)
        return serving_load(nodes, plan, warm_version=None)
    return fan_out(nodes, lambda node: push.unload_on_node(node, model))


def sibling_set_apply(
    *,
    cluster: TritonCluster,
    version: ModelVersion,
    name: str,
    calls_to: dict[str, str] | None = None,
) -> dict[int, push.NodeOutcome]:
    """Serve `version` under `name` (its sibling name, with its own config) on every node of
    `cluster`, warmed, beside whatever the model's own name serves; LoadFailed naming every
    node that did not load it. The memory check before each load holds for this second copy
    as for any (deployments/push.py). `calls_to`: an ensemble's steps to call under other
    names (a caller's sibling in a graph release calls the candidate's sibling)."""
    nodes = list(cluster.nodes.all())
    plan = serving_plan(cluster, [version], name=name, calls_to=calls_to)
    outcomes = serving_load(nodes, plan, warm_version=version.version)
    failed = load_failures(nodes, outcomes)
    if failed:
        raise LoadFailed(failed)
    return outcomes


def sibling_unload(*, cluster: TritonCluster, name: str) -> dict[str, str]:
    """Unload the sibling `name` from every node; {node name: error} of those that failed
    (a node where it is not loaded answers as done)."""
    nodes = list(cluster.nodes.all())
    outcomes = fan_out(nodes, lambda node: push.unload_on_node(node, name))
    return load_failures(nodes, outcomes)
