"""Webhook pages (release managers): the webhooks, a form to add one, each one's delivery
log. Writes go through notifications.services; the secret is never shown again."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from accounts.roles import Role, user_has_role
from notifications import selectors
from notifications.catalog import EVENTS, FORMATS, SEVERITIES
from notifications.models import Delivery
from notifications.services import (
    WebhookError,
    webhook_create,
    webhook_delete,
    webhook_update,
)

MAX_LISTED = 200


def _only_release_managers(request) -> None:
    if not user_has_role(request.user, Role.RELEASE_MANAGERS.value):
        raise PermissionDenied("Webhooks are managed by release managers.")


def _webhook_or_404(webhook_id: int):
    hook = selectors.webhook_get(webhook_id=webhook_id)
    if hook is None:
        raise Http404(f"No webhook {webhook_id}.")
    return hook


def _list_page(request, status: int = 200):
    hooks = list(selectors.webhook_list())
    for hook in hooks:
        hook.recent = list(selectors.deliveries_of(webhook=hook)[:5])
    context = {
        "webhooks": hooks,
        "events": EVENTS,
        "severities": SEVERITIES,
        "formats": FORMATS,
        "form": request.POST if request.method == "POST" else {},
    }
    return render(request, "console/webhooks/list.html", context, status=status)


@login_required
def webhook_list(request):
    """GET the webhooks; POST {url, secret, events, min_severity, format} adds one."""
    _only_release_managers(request)
    if request.method != "POST":
        return _list_page(request)
    post = request.POST
    try:
        hook = webhook_create(
            actor=request.user,
            url=post.get("url", "").strip(),
            secret=post.get("secret", ""),
            events=post.getlist("events"),
            min_severity=post.get("min_severity", SEVERITIES[0]),
            format=post.get("format", FORMATS[0]),
            description=post.get("description", "").strip()[:200],
        )
    except WebhookError as exc:
        messages.error(request, f"{exc.field}: {exc.message}" if exc.field else exc.message)
        return _list_page(request, status=400)
    messages.success(request, f"Added webhook {hook.pk}: {hook.url}.")
    return redirect("console:webhook-detail", webhook_id=hook.pk)


@login_required
def webhook_detail(request, webhook_id: int):
    """One webhook and its delivery log, newest first (`?status=` narrows it)."""
    _only_release_managers(request)
    hook = _webhook_or_404(webhook_id)
    status = request.GET.get("status", "")
    status = status if status in Delivery.Status.values else ""
    deliveries = selectors.deliveries_of(webhook=hook, status=status or None)[:MAX_LISTED]
    context = {
        "webhook": hook,
        "deliveries": deliveries,
        "status": status,
        "statuses": Delivery.Status.values,
    }
    return render(request, "console/webhooks/detail.html", context)


@login_required
@require_POST
def webhook_toggle(request, webhook_id: int):
    _only_release_managers(request)
    hook = _webhook_or_404(webhook_id)
    webhook_update(webhook=hook, actor=request.user, is_active=not hook.is_active)
    messages.success(request, f"Webhook {hook.pk} {'paused' if hook.is_active else 'resumed'}.")
    return redirect("console:webhook-detail", webhook_id=hook.pk)


@login_required
@require_POST
def webhook_remove(request, webhook_id: int):
    _only_release_managers(request)
    hook = _webhook_or_404(webhook_id)
    webhook_delete(webhook=hook, actor=request.user)
    messages.success(request, f"Deleted webhook {webhook_id} and its delivery log.")
    return redirect("console:webhook-list")
