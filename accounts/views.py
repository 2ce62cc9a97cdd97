"""The console's sign-in page, throttled like the token endpoint (accounts/signin_throttle.py)."""

from django.contrib.auth.views import LoginView

from accounts.services import signin_failed, signin_refused
from accounts.signin_throttle import signin_retry_after


class ThrottledLoginView(LoginView):
    """Django's LoginView; too many failures answer 429 before the password is checked."""

    template_name = "accounts/login.html"

    def post(self, request, *args, **kwargs):
        username = request.POST.get("username", "")
        retry_after = signin_retry_after(request, username)
        if retry_after is None:
            return super().post(request, *args, **kwargs)
        signin_refused(request=request, username=username, via="console")
        form = self.get_form_class()(request)  # unbound: its errors would check the password
        context = self.get_context_data(form=form, throttled_s=retry_after)
        response = self.render_to_response(context, status=429)
        response["Retry-After"] = str(retry_after)
        return response

    def form_invalid(self, form):
        username = self.request.POST.get("username", "")
        signin_failed(request=self.request, username=username, via="console")
        return super().form_invalid(form)
