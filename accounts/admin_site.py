"""The admin site with its sign-in throttled like every other one (accounts/signin_throttle.py).

A client IP past its failures is answered 429 before the body is read (the middleware runs
before the CSRF check, which would parse the form); a failed admin sign-in counts and is
audited like a console or API one.
"""

from __future__ import annotations

from django.contrib.admin import AdminSite
from django.contrib.admin.apps import AdminConfig
from django.http import HttpResponse
from django.urls import reverse
from django.utils.deprecation import MiddlewareMixin


def too_many(retry_after: int) -> HttpResponse:
    text = f"Too many failed sign-ins. Try again in {retry_after} s."
    response = HttpResponse(text, status=429, content_type="text/plain; charset=utf-8")
    response["Retry-After"] = str(retry_after)
    return response


class SwitchyardAdminSite(AdminSite):
    """Django's admin; its login view is throttled per client IP before parsing."""

    def login(self, request, extra_context=None):
        # Imported here: this module is loaded with the app registry, before any model.
        from accounts.services import signin_failed, signin_refused
        from accounts.signin_throttle import signin_ip_retry_after, signin_retry_after

        if request.method != "POST":
            return super().login(request, extra_context)
        retry_after = signin_ip_retry_after(request)
        if retry_after is None:
            username = request.POST.get("username", "")[:150]
            retry_after = signin_retry_after(request, username)
        else:
            username = ""
        if retry_after is not None:
            signin_refused(request=request, username=username, via="admin")
            return too_many(retry_after)
        response = super().login(request, extra_context)
        if response.status_code == 200:  # the form shown again: the sign-in failed
            signin_failed(request=request, username=username, via="admin")
        return response


class AdminLoginThrottleMiddleware(MiddlewareMixin):
    """POST /admin/login/ from a client IP past its failures answers 429 here, before the
    CSRF check or the view reads the body (listed before CsrfViewMiddleware)."""

    def process_request(self, request) -> HttpResponse | None:
        from accounts.services import signin_refused
        from accounts.signin_throttle import signin_ip_retry_after

        if request.method != "POST" or request.path_info != reverse("admin:login"):
            return None
        retry_after = signin_ip_retry_after(request)
        if retry_after is None:
            return None
        signin_refused(request=request, username="", via="admin")
        return too_many(retry_after)


class SwitchyardAdminConfig(AdminConfig):
    default_site = "accounts.admin_site.SwitchyardAdminSite"
