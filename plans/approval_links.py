"""Signed links to a plan wave's approval page, carried by `plan.waiting_approval` webhook
messages. A link names one plan and one wave, signed with the install's secret key, and lasts
SWITCHYARD_APPROVAL_LINK_MAX_AGE_S. It grants nothing by itself: the page still needs a
signed-in release manager other than the plan's author, and it acts only while that very wave
waits (an old link cannot approve a later wave)."""

from urllib.parse import urlencode

from django.conf import settings
from django.core import signing

from accounts.errors import Refused

SALT = "switchyard.plans.approval-link"


def approval_token(*, plan_id: int, wave: int) -> str:
    """`wave` is the wave's index (0 for the first)."""
    return signing.dumps({"plan": plan_id, "wave": wave}, salt=SALT)


def approval_url(*, plan_id: int, wave: int) -> str:
    """The link on the configured console address; '' when SWITCHYARD_CONSOLE_URL is unset."""
    base = settings.SWITCHYARD_CONSOLE_URL.rstrip("/")
    if not base:
        return ""
    token = approval_token(plan_id=plan_id, wave=wave)
    return f"{base}/plans/{plan_id}/approve/?{urlencode({'token': token})}"


def approval_wave(token: str, *, plan_id: int) -> int:
    """The wave index a link for `plan_id` names; Refused when it is altered, expired, or for
    another plan."""
    try:
        signed = signing.loads(
            token or "", salt=SALT, max_age=settings.SWITCHYARD_APPROVAL_LINK_MAX_AGE_S
        )
    except signing.SignatureExpired:
        raise Refused("This approval link has expired: approve on the plan's page.") from None
    except signing.BadSignature:
        raise Refused("This approval link is not valid (altered or cut short).") from None
    if not isinstance(signed, dict) or signed.get("plan") != plan_id:
        raise Refused("This approval link is for another plan.")
    return int(signed.get("wave", -1))
