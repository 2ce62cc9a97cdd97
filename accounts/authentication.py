"""DRF authentication by `Authorization: Token <token>` against hashed, expiring tokens."""

from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed

from accounts.roles import groups_read_once
from accounts.services import api_token_use


class ApiTokenAuthentication(TokenAuthentication):
    """request.user is the token's user and request.auth the ApiToken row."""

    keyword = "Token"

    def authenticate_credentials(self, key: str):
        token = api_token_use(secret=key)
        if token is None:
            raise AuthenticationFailed("Invalid, expired or revoked token.")
        if not token.user.is_active:
            raise AuthenticationFailed("User inactive or deleted.")
        return groups_read_once(token.user), token
