"""Passwords are hashed with Argon2id (accounts/hashers.py); an older PBKDF2 hash is
re-hashed with it when its user signs in."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import identify_hasher, make_password
from django.test import Client

from accounts.hashers import SwitchyardArgon2PasswordHasher

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery staple"
PRODUCTION_HASHERS = [
    "accounts.hashers.SwitchyardArgon2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2SHA1PasswordHasher",
    "django.contrib.auth.hashers.ScryptPasswordHasher",
]


@pytest.fixture
def production_hashers(settings):
    from controlplane.settings import base

    assert base.PASSWORD_HASHERS == PRODUCTION_HASHERS  # what this test stands for
    settings.PASSWORD_HASHERS = base.PASSWORD_HASHERS


def test_a_pbkdf2_hash_becomes_argon2id_when_its_user_signs_in(production_hashers):
    user = get_user_model().objects.create(
        username="pat", password=make_password(PASSWORD, hasher="pbkdf2_sha256")
    )
    assert user.password.startswith("pbkdf2_sha256$")

    answer = Client().post("/login/", {"username": "pat", "password": PASSWORD})

    assert answer.status_code == 302  # signed in, sent on to the console
    user.refresh_from_db()
    assert user.password.startswith("argon2$argon2id$v=19$m=19456,t=2,p=1$"), user.password
    assert identify_hasher(user.password).algorithm == "argon2"
    assert user.check_password(PASSWORD)
    assert Client().login(username="pat", password=PASSWORD)


def test_a_wrong_password_leaves_the_old_hash(production_hashers):
    old = make_password(PASSWORD, hasher="pbkdf2_sha256")
    user = get_user_model().objects.create(username="pam", password=old)

    answer = Client().post("/login/", {"username": "pam", "password": "not it"})

    assert answer.status_code == 200  # the form again, with its error
    user.refresh_from_db()
    assert user.password == old


def test_new_passwords_get_the_documented_argon2id_parameters(production_hashers):
    user = get_user_model().objects.create(username="ann")
    user.set_password(PASSWORD)
    details = SwitchyardArgon2PasswordHasher().decode(user.password)
    assert (details["variety"], details["memory_cost"], details["time_cost"]) == (
        "argon2id",
        19456,
        2,
    )
    assert details["parallelism"] == 1
