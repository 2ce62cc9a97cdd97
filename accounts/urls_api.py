from django.urls import path

from accounts.apis import MeApi, TokenCreateApi, TokenListApi, TokenRevokeApi, WsTicketApi

urlpatterns = [
    path("auth/token/", TokenCreateApi.as_view(), name="api-auth-token"),
    path("auth/tokens/", TokenListApi.as_view(), name="api-auth-tokens"),
    path("auth/tokens/<int:token_id>/", TokenRevokeApi.as_view(), name="api-auth-token-revoke"),
    path("auth/ws-ticket/", WsTicketApi.as_view(), name="api-auth-ws-ticket"),
    path("auth/me/", MeApi.as_view(), name="api-auth-me"),
]
