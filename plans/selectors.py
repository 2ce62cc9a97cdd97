"""Reading release plans: the list, one plan with its cells (wave x cluster), approvals and
events."""

from django.db.models import QuerySet

from plans.models import PlanRelease, ReleasePlan


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
