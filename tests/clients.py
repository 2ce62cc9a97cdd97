"""API clients for tests: one signed in as a given user (DRF's force_authenticate)."""

from rest_framework.test import APIClient


def api_as(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client
