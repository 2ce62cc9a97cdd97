"""Run a deployment in the test's process and insist it succeeded, saying why when not."""

from deployments.executor import deployment_run
from deployments.models import Deployment


def pushed(deployment: Deployment) -> Deployment:
    """`deployment_run` it; a failure names the deployment's and each node's error."""
    done = deployment_run(deployment_id=deployment.pk)
    if done.status != Deployment.Status.SUCCEEDED:
        nodes = [f"{n.node_name}: {n.status} {n.error}" for n in done.nodes.all()]
        raise AssertionError(f"deployment {done.status}: {done.error}; nodes: {nodes}")
    return done
