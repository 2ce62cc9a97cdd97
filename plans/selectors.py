"""Reading release plans: the list, one plan with its cells (wave x cluster), approvals and
events."""

from decimal import Decimal

from django.db.models import QuerySet

from plans.models import PlanRelease, ReleasePlan
from reports.selectors import release_costs


def plan_list(
    *, model: str | None = None, cluster: str | None = None, state: str | None = None, since=None
) -> QuerySet[ReleasePlan]:
    """Plans, newest first: of a model, with a wave on a cluster, in a state, started since."""
    qs = ReleasePlan.objects.select_related("model", "candidate", "created_by")
    if model:
        qs = qs.filter(model__name=model)
    if cluster:
        qs = qs.filter(cells__cluster__name=cluster)
    if state:
        qs = qs.filter(phase=state.upper())
    if since:
        qs = qs.filter(created_at__gte=since)
    return qs.order_by("-created_at", "-id")


def plan_get(*, plan_id: int) -> ReleasePlan | None:
    return (
        ReleasePlan.objects.select_related("model", "candidate", "created_by")
        .prefetch_related("approvals", "events")
        .filter(pk=plan_id)
        .first()
    )


def _gates(release) -> dict:
    """Where a cell's release is in its steps and what its last gate said."""
    if release is None:
        return {"step": None, "gate": None, "gate_failed": []}
    last = release.last_analysis or {}
    failed = [c.get("name", "") for c in last.get("checks") or [] if c.get("passed") is False]
    return {
        "step": f"{min(release.step_index + 1, len(release.steps))}/{len(release.steps)}",
        "gate": last.get("result"),
        "gate_failed": failed,
    }


def plan_waves(plan: ReleasePlan) -> list[dict]:
    """Each wave as stored, with its clusters' cells: the release (id, phase, weight) once
    started, else why it could not start."""
    cells = PlanRelease.objects.filter(plan=plan).select_related("cluster", "release", "revert")
    by_wave: dict[int, list[dict]] = {}
    for cell in cells:
        release = cell.release
        by_wave.setdefault(cell.wave, []).append(
            {
                "cluster": cell.cluster.name,
                "release": release.pk if release else None,
                "phase": release.phase if release else None,
                "weight": release.serving_weight if release else None,
                **_gates(release),
                "error": cell.error,
                "revert": cell.revert_id,
                "revert_phase": cell.revert.phase if cell.revert else None,
                "revert_error": cell.revert_error,
            }
        )
    return [
        {
            "index": i,
            "bake_s": wave.get("bake_s", 0.0),
            "approval": bool(wave.get("approval")),
            "release": wave.get("release") or {},
            "clusters": by_wave.get(i, []),
        }
        for i, wave in enumerate(plan.waves)
    ]


def plan_followed(*, plan_id: int) -> tuple[str | None, list[int]]:
    """The plan's phase (None: no such plan) and the releases it started or brought back:
    what the plan page's socket listens to."""
    phase = ReleasePlan.objects.filter(pk=plan_id).values_list("phase", flat=True).first()
    if phase is None:
        return None, []
    ids = set()
    for release, revert in PlanRelease.objects.filter(plan_id=plan_id).values_list(
        "release_id", "revert_id"
    ):
        ids.update(i for i in (release, revert) if i is not None)
    return phase, sorted(ids)


def plan_costs(plan: ReleasePlan) -> dict:
    """Per cluster with a release: baseline and candidate cost per 1k successful requests
    during it (reports' release_costs); across them, each side's cost over its requests,
    and the candidate's delta in percent (None until both sides have figures)."""
    rows, totals = [], {"baseline": [Decimal(0), 0], "candidate": [Decimal(0), 0]}
    cells = PlanRelease.objects.filter(plan=plan, release__isnull=False).select_related(
        "cluster", "release__model", "release__baseline", "release__candidate"
    )
    for cell in cells:
        during = release_costs(cell.release)[0]
        rows.append({"cluster": cell.cluster.name, "release": cell.release, **during})
        for side in ("baseline", "candidate"):
            figures = during.get(side) or {}
            if figures.get("cost") is not None:
                totals[side][0] += Decimal(str(figures["cost"]))
                totals[side][1] += int(figures.get("successes") or 0)
    exact = {side: cost * 1000 / n if n else None for side, (cost, n) in totals.items()}
    per_1k = {s: v.quantize(Decimal("0.0001")) if v is not None else None for s, v in exact.items()}
    delta = None
    if exact["baseline"] and exact["candidate"] is not None:
        delta = ((exact["candidate"] / exact["baseline"] - 1) * 100).quantize(Decimal("0.1"))
    return {"cost_rows": rows, "cost_per_1k": per_1k, "cost_delta_pct": delta}
