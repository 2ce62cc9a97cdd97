"""Running one piece of work on many nodes at once (plain Python, no ORM).

Pushes, reconcile, the cluster status page and a release's observation all reach every node
of a cluster in parallel: one thread per node, results by node id.
"""

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, TypeVar

T = TypeVar("T")


def fan_out(
    nodes: Sequence,
    work: Callable[[Any], T],
    *,
    while_waiting: Callable[[], None] | None = None,
    on_result: Callable[[Any, T], None] | None = None,
) -> dict[int, T]:
    """Run `work(node)` on every node at once; {node.pk: result}.

    Both callbacks run in the calling thread, so that database writes need not delay the
    nodes: `while_waiting()` once every node's work is submitted, then `on_result(node,
    result)` for each node as soon as its result is in (first finished, first called).
    """
    if not nodes:
        return {}
    pool = ThreadPoolExecutor(max_workers=len(nodes))
    try:
        futures = {pool.submit(work, node): node for node in nodes}
        if while_waiting is not None:
            while_waiting()
        results = {}
        for future in as_completed(futures):
            node = futures[future]
            results[node.pk] = future.result()
            if on_result is not None:
                on_result(node, results[node.pk])
    except BaseException:
        pool.shutdown(wait=True)  # never leave work running behind a failed caller
        raise
    pool.shutdown(wait=False)  # every result is in: the idle threads exit on their own
    return {node.pk: results[node.pk] for node in nodes}
