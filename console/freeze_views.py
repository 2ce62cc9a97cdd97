"""Freeze windows and emergency overrides from a cluster's page: declare one (dated or weekly,
this cluster or every cluster), delete one, ask for an override, approve another release
manager's. Each form is checked by the API's own input serializer (console/api_forms.py) and
written through deployments/freezes.py, like the API."""

from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from accounts.errors import ApplicationError
from accounts.roles import Role, user_has_role
from console.api_forms import api_checked
from deployments import freezes
from deployments.freeze_apis import FreezeListCreateApi, FreezeOverrideCreateApi
from deployments.models import FreezeOverride, FreezeWindow
from deployments.selectors import cluster_get


def _cluster(request, name: str):
    if not user_has_role(request.user, Role.RELEASE_MANAGERS.value):
        raise PermissionDenied("Freezes are declared and overridden by release managers.")
    cluster = cluster_get(name=name)
    if cluster is None:
        raise Http404(f"No cluster named '{name}'.")
    return cluster


def _local(value: str, zone: str) -> str | None:
    """A browser's datetime-local value read in the freeze's time zone, as ISO 8601 with its
    offset (None when empty; left as typed when it cannot be read, for the check to say so)."""
    value = value.strip()
    if not value:
        return None
    try:
        return datetime.fromisoformat(value).replace(tzinfo=ZoneInfo(zone)).isoformat()
    except (ValueError, ZoneInfoNotFoundError):
        return value


def _freeze_body(post, cluster_name: str) -> dict:
    zone = post.get("timezone", "").strip() or "UTC"
    body = {"cluster": None if post.get("fleet_wide") == "on" else cluster_name,
            "reason": post.get("reason", ""), "timezone": zone}  # fmt: skip
    if post.get("kind") == "weekly":
        body.update(weekdays=post.getlist("weekdays")[:7], start=post.get("start") or None,
                    end=post.get("end") or None)  # fmt: skip
    else:
        body.update(starts_at=_local(post.get("starts_at", ""), zone),
                    ends_at=_local(post.get("ends_at", ""), zone))  # fmt: skip
    return body


def _done(request, name: str, errors: list[str], write, success: str):
    """Run `write` unless the form had errors; say what happened on the cluster's page."""
    try:
        if errors:
            raise ApplicationError("; ".join(errors))
        write()
    except ApplicationError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, success)
    return redirect("console:cluster-detail", name=name)


@login_required
@require_POST
def freeze_create(request, name: str):
    cluster = _cluster(request, name)
    values, errors = api_checked(
        FreezeListCreateApi.InputSerializer, _freeze_body(request.POST, name)
    )
    scope = values.pop("cluster", name)
    tz = values.pop("timezone", "UTC")

    def write():
        freezes.freeze_window_create(actor=request.user, cluster=cluster if scope else None,
                                     tz=tz, **values)  # fmt: skip

    where = "every cluster" if scope is None else name
    return _done(request, name, errors, write, f"Freeze declared on {where}.")


@login_required
@require_POST
def freeze_delete(request, name: str, freeze_id: int):
    _cluster(request, name)
    window = FreezeWindow.objects.select_related("cluster").filter(pk=freeze_id).first()
    if window is None:
        raise Http404(f"No freeze {freeze_id}.")

    def write():
        freezes.freeze_window_delete(actor=request.user, window=window)

    return _done(request, name, [], write, f"Freeze '{window.reason}' deleted.")


@login_required
@require_POST
def override_request(request, name: str):
    cluster = _cluster(request, name)
    body = {"reason": request.POST.get("reason", ""), "hours": request.POST.get("hours", "")}
    values, errors = api_checked(FreezeOverrideCreateApi.InputSerializer, body)

    def write():
        freezes.freeze_override_request(actor=request.user, cluster=cluster, **values)

    success = "Override asked: a second release manager approves it on this page."
    return _done(request, name, errors, write, success)


@login_required
@require_POST
def override_approve(request, name: str, override_id: int):
    _cluster(request, name)
    row = FreezeOverride.objects.filter(pk=override_id, cluster__name=name).first()
    if row is None:
        raise Http404(f"No freeze override {override_id} on {name}.")

    def write():
        freezes.freeze_override_approve(actor=request.user, override=row)

    return _done(request, name, [], write, f"Override approved: {name} is not frozen for now.")
