"""The signed-in user's API tokens: list, create (the secret is shown once) and revoke."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from accounts.selectors import api_tokens_of
from accounts.services import api_token_create, api_token_revoke

MAX_LISTED = 200


def _page(request, *, secret: str = "", status: int = 200):
    tokens = api_tokens_of(user=request.user)[:MAX_LISTED]
    context = {"tokens": tokens, "new_secret": secret}
    return render(request, "console/tokens.html", context, status=status)


@login_required
def token_list(request):
    """GET the list; POST {"name"} makes a token and shows its secret on this answer only."""
    if request.method != "POST":
        return _page(request)
    name = request.POST.get("name", "").strip()
    if not name or len(name) > 100:
        messages.error(request, "Give the token a name of 1 to 100 characters.")
        return _page(request, status=400)
    _, secret = api_token_create(user=request.user, name=name)
    response = _page(request, secret=secret)
    response["Cache-Control"] = "no-store"
    return response


@login_required
@require_POST
def token_revoke(request, token_id: int):
    token = get_object_or_404(api_tokens_of(user=request.user), pk=token_id)
    api_token_revoke(token=token, actor=request.user)
    messages.success(request, f"Revoked {token.name} ({token.prefix}…).")
    return redirect("console:token-list")
