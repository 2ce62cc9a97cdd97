"""Celery lanes: work is queued by urgency, so a release's safety never waits behind a push or
a benchmark.

Three lanes, each a queue of its own with its own worker slots (docs/operations.md §queues):

* `releases` (`<base>.releases`): release ticks. A tick is short and must run within about a
  second of being due; a tick that waited longer is dropped (it expires) because the next one
  is already queued.
* `fleet` (`<base>`, the default queue): pushes, reconcile, smoke tests, router sync, health
  probes, webhooks and everything not listed below.
* `long` (`<base>.long`): benchmarks (up to 15 minutes each), the sweeps and the cost rollup.

`<base>` is `CELERY_TASK_DEFAULT_QUEUE` (`SWITCHYARD_CELERY_QUEUE`). An explicit
`apply_async(queue=...)` still wins over the lane. Pure: no app is imported.
"""

from celery import current_app

RELEASES, FLEET, LONG = "releases", "fleet", "long"
LANES = (RELEASES, FLEET, LONG)

# Task name -> lane; a task not named here runs on the fleet lane.
TASK_LANES: dict[str, str] = {
    "releases.tick": RELEASES,
    "releases.tick_active": RELEASES,
    "plans.tick": RELEASES,
    "plans.tick_active": RELEASES,
    "benchmarks.run": LONG,
    "benchmarks.sweep_lost": LONG,
    "deployments.sweep_lost": LONG,
    "models_registry.storage_sweep": LONG,
    "reports.cost_rollup": LONG,
}


def lane_queue(base: str, lane: str) -> str:
    """The queue of `lane` for the base queue name `base`."""
    if lane not in LANES:
        raise ValueError(f"unknown lane {lane!r}: one of {', '.join(LANES)}")
    return base if lane == FLEET else f"{base}.{lane}"


def all_queues(base: str) -> list[str]:
    """Every lane's queue for `base`, in the order a worker serving all of them lists them."""
    return [lane_queue(base, lane) for lane in LANES]


def lane_of(task_name: str) -> str:
    return TASK_LANES.get(task_name, FLEET)


def route(name, args, kwargs, options, task=None, **kw) -> dict:
    """Celery router (CELERY_TASK_ROUTES): the queue of the task's lane for the app's base
    queue, read when the task is sent (tests swap the base queue at run time)."""
    return {"queue": lane_queue(current_app.conf.task_default_queue, lane_of(name))}
