"""Warnings at a release's start, pure (no ORM, no clock): what would keep it from being
judged. A warning never refuses the release; it is answered, stored and shown.

* Traffic: each analysis interval of a step needs `min_requests` candidate requests. At the
  model's measured rate through the router's HTTP split, the first step (weight w %) sees
  rate x w/100 x interval of them; below `min_requests` every interval is inconclusive and
  after `max_inconclusive_checks` the release pauses (or rolls back: `on_inconclusive`).
  The rate it needs is min_requests / (w/100 x interval).
* SLA: models_registry/sla.py (also warned about when a model is made and a version
  uploaded).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TrafficPlan:
    first_weight: float  # % of the first step with traffic
    interval_s: float  # analysis interval
    min_requests: int
    max_inconclusive_checks: int
    on_inconclusive: str


def needed_rate(plan: TrafficPlan) -> float:
    """Requests per second through the router the first step needs to be judged."""
    return plan.min_requests / (plan.first_weight / 100.0 * plan.interval_s)


def traffic_warning(plan: TrafficPlan, *, routed_requests: int, window_s: float) -> str | None:
    """The warning when the measured rate cannot reach min_requests at the first step."""
    if window_s <= 0 or plan.first_weight <= 0 or plan.interval_s <= 0:
        return None
    rate, need = routed_requests / window_s, needed_rate(plan)
    if rate >= need:
        return None
    expected = rate * plan.first_weight / 100.0 * plan.interval_s
    then = (
        "pauses for a person"
        if plan.on_inconclusive == "pause"
        else "rolls back (on_inconclusive: rollback)"
    )
    return (
        f"Too little traffic to judge the first step: {rate:.2f} req/s went through the "
        f"router's HTTP split over the last {window_s:.0f} s, so the {plan.first_weight:g}% "
        f"step sees about {expected:.1f} candidate requests per {plan.interval_s:g} s "
        f"interval, under min_requests ({plan.min_requests}). Every check will be "
        f"inconclusive and after {plan.max_inconclusive_checks} the release {then}. It needs "
        f"at least {need:.2f} req/s through the router, or a larger first step, a longer "
        "interval or a lower min_requests."
    )
