from django.urls import path

from accounts.apis import MeApi, TokenCreateApi

urlpatterns = [
    path("auth/token/", TokenCreateApi.as_view(), name="api-auth-token"),
    path("auth/me/", MeApi.as_view(), name="api-auth-me"),
]
