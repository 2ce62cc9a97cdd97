"""Release plan pages: the list, and a plan as a grid of waves x clusters with its approvals,
events, cost per 1k of baseline and candidate on each cluster, and the one stop."""

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from accounts.errors import ApplicationError
from accounts.roles import Role, user_has_role
from console.api_forms import api_checked
from console.paging import api_filters, paged
from deployments.freezes import cluster_freezes, cluster_frozen
from deployments.models import TritonCluster
from models_registry.selectors import version_choices, version_chosen
from plans import selectors
from plans.apis import PLAN, PlanFilters, PlanListCreateApi, waves_of
from plans.approval_links import approval_wave
from plans.services import plan_action, plan_create
from plans.state_machine import ACTIONS, Phase


def _can_act(user) -> bool:
    return user_has_role(user, Role.RELEASE_MANAGERS.value)


# Wave rows the start form offers; a plan needing more starts through the API or the CLI.
FORM_WAVES = 4


@login_required
def plan_list(request):
    filters, values, errors = api_filters(request, PlanFilters)
    listed = paged(request, selectors.plan_list(**filters), values=values)
    context = {
        **listed,
        "plans": listed["page"].object_list,
        "values": values,
        "errors": errors,
        "states": list(PlanFilters().fields["state"].choices),
        "can_act": _can_act(request.user),
        "clusters": TritonCluster.objects.order_by("name"),
        "versions": version_choices(),
        "wave_rows": range(FORM_WAVES),
    }
    return render(request, "console/plans/list.html", context)


def _form_waves(post) -> list[dict]:
    """The form's wave rows with at least one cluster, as the API's body holds them."""
    waves = []
    for i in range(FORM_WAVES):
        clusters = [name for name in post.getlist(f"wave-{i}-clusters")[:50] if name]
        if not clusters:
            continue
        release = {}
        steps = post.get(f"wave-{i}-steps", "").strip()
        if steps:
            release["steps"] = [part.strip() for part in steps.split(",") if part.strip()]
        interval = post.get(f"wave-{i}-step_interval_s", "").strip()
        if interval:
            release["step_interval_s"] = interval
        waves.append({"clusters": clusters, "release": release,
                      "bake_s": post.get(f"wave-{i}-bake_s", "").strip() or 0,
                      "approval": post.get(f"wave-{i}-approval") == "on"})  # fmt: skip
    return waves


@login_required
@require_POST
def plan_start(request):
    """Start a plan from the list page's form, checked as the API checks its body."""
    if not _can_act(request.user):
        raise PermissionDenied("Starting a plan needs the release-managers role.")
    post = request.POST
    candidate = version_chosen(version_id=post.get("version_id", ""), typed=post.get("version", ""))
    if candidate is None:
        messages.error(request, "Choose a candidate version (or type one: model vN).")
        return redirect("console:plan-list")
    body = {"model": candidate.model.name, "candidate_version": candidate.version,
            "waves": _form_waves(post), "on_failure": post.get("on_failure", "halt")}  # fmt: skip
    if not body["waves"]:
        messages.error(request, "A plan needs at least one wave with a cluster.")
        return redirect("console:plan-list")
    values, errors = api_checked(PlanListCreateApi.InputSerializer, body)
    try:
        if errors:
            raise ApplicationError("; ".join(errors))
        plan = plan_create(candidate=candidate, waves=waves_of(values), actor=request.user,
                           on_failure=values["on_failure"])  # fmt: skip
    except ApplicationError as exc:
        messages.error(request, f"The plan did not start: {exc.message}")
        return redirect("console:plan-list")
    return redirect("console:plan-detail", plan_id=plan.pk)


def _plan_or_404(plan_id: int):
    plan = selectors.plan_get(plan_id=plan_id)
    if plan is None:
        raise Http404(f"No release plan {plan_id}.")
    return plan


def _other(is_author: bool) -> bool:
    """Whether a decision form is offered: to release managers other than the author, or to
    the author too where SWITCHYARD_PLAN_SELF_APPROVAL lifts four-eyes (as the service does)."""
    return not is_author or settings.SWITCHYARD_PLAN_SELF_APPROVAL


def _grid_context(request, plan) -> dict:
    phase = Phase(plan.phase)
    author = plan.created_by_id == request.user.pk
    actions = [a for a in ("halt", "resume", "rollback") if phase in ACTIONS[a]]
    return {
        "plan": plan,
        "waves": selectors.plan_waves(plan),
        "waiting_for": PLAN.waiting_for(plan),
        "can_act": _can_act(request.user) and not plan.pending_action,
        "can_decide": _can_act(request.user) and phase in ACTIONS["approve"] and _other(author),
        "is_author": author,
        "actions": actions,
    }


@login_required
def plan_detail(request, plan_id: int):
    plan = _plan_or_404(plan_id)
    context = {
        **_grid_context(request, plan),
        **selectors.plan_costs(plan),
        "freezes": _freezes(plan),
    }
    return render(request, "console/plans/detail.html", context)


def _freezes(plan) -> list[dict]:
    """Per cluster of the plan, in wave order: frozen now (why) and the freezes coming."""
    names = [name for wave in plan.waves for name in wave["clusters"]]
    return [{"cluster": n, "frozen": cluster_frozen(n), "freezes": cluster_freezes(n, limit=3)}
            for n in names]  # fmt: skip


@login_required
def plan_grid(request, plan_id: int):
    """The parts that change (the grid with its actions, approvals, events; `?cost=1` the
    cost card too), fetched again whenever the page's socket says the plan or one of its
    releases changed (plan.js)."""
    plan = _plan_or_404(plan_id)
    context = _grid_context(request, plan)
    if request.GET.get("cost"):  # the plan changed (a release started or ended): its costs too
        context.update(selectors.plan_costs(plan), with_cost=True)
    return render(request, "console/plans/_live.html", context)


@login_required
@require_POST
def plan_act(request, plan_id: int):
    if not _can_act(request.user):
        raise PermissionDenied("Plan actions need the release-managers role.")
    plan = _plan_or_404(plan_id)
    try:
        plan_action(plan=plan, action=request.POST.get("action", ""), actor=request.user,
                    comment=request.POST.get("comment", "")[:2000])  # fmt: skip
    except ApplicationError as exc:
        messages.error(request, exc.message)
    return redirect("console:plan-detail", plan_id=plan_id)


def _link_context(request, plan, wave: int) -> dict:
    waiting = plan.phase == Phase.WAITING_APPROVAL.value and plan.wave_index == wave
    author = plan.created_by_id == request.user.pk
    return {
        "plan": plan,
        "wave": plan.waves[wave] if 0 <= wave < len(plan.waves) else None,
        "wave_number": wave + 1,
        "waiting": waiting,
        "is_author": author,
        "can_decide": waiting and _can_act(request.user) and _other(author),
        "token": request.GET.get("token") or request.POST.get("token", ""),
    }


@login_required
def plan_approve_link(request, plan_id: int):
    """The page a webhook message's signed link opens: one wave of one plan to approve or
    refuse, by a signed-in release manager other than the author, while that wave waits."""
    plan = _plan_or_404(plan_id)
    token = request.GET.get("token") or request.POST.get("token", "")
    try:
        wave = approval_wave(token, plan_id=plan.pk)
    except ApplicationError as exc:
        context = {"plan": plan, "error": exc.message}
        return render(request, "console/plans/approve.html", context, status=400)
    if request.method == "POST":
        action = request.POST.get("action", "")
        if not _can_act(request.user) or action not in ("approve", "refuse"):
            raise PermissionDenied("Approvals are given by release managers.")
        try:
            plan_action(plan=plan, action=action, actor=request.user, wave=wave,
                        comment=request.POST.get("comment", "")[:2000])  # fmt: skip
        except ApplicationError as exc:
            messages.error(request, exc.message)
        else:
            verb = "approved" if action == "approve" else "refused"
            messages.success(request, f"Wave {wave + 1} {verb}.")
            return redirect("console:plan-detail", plan_id=plan.pk)
        plan = _plan_or_404(plan_id)
    return render(request, "console/plans/approve.html", _link_context(request, plan, wave))
