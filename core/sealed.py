"""Secrets the control plane must read back (a cluster's node key, a webhook's signing
secret), sealed at rest with Fernet: `seal` before a value is stored, `unseal` when it is
used. Nothing here puts a secret's value into a message, an exception or a repr.

The Fernet keys are SWITCHYARD_SECRETS_KEY (comma-separated: the first seals, all unseal, so
a key is rotated by putting the new one first); without it one key is derived from Django's
SECRET_KEY with HKDF-SHA256, so changing SECRET_KEY then makes every sealed value
unreadable. The functions above `seal` are pure: the caller passes the settings.
"""

from __future__ import annotations

import base64
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

_HKDF_INFO = b"switchyard secrets v1"


class SecretError(ValueError):
    """A secret could not be stored or read; the message never contains its value."""


def derived_key(secret_key: str) -> bytes:
    """A Fernet key derived from Django's SECRET_KEY (HKDF-SHA256, fixed context)."""
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_HKDF_INFO)
    return base64.urlsafe_b64encode(hkdf.derive(secret_key.encode()))


def fernet_for(configured: str, *, secret_key: str) -> MultiFernet:
    """The keys of SWITCHYARD_SECRETS_KEY (`configured`), else the one derived from SECRET_KEY."""
    keys = [k.strip() for k in configured.split(",") if k.strip()]
    try:
        fernets = [Fernet(k) for k in keys] or [Fernet(derived_key(secret_key))]
    except (ValueError, TypeError):
        raise SecretError(
            "SWITCHYARD_SECRETS_KEY must be Fernet keys (32 url-safe base64 bytes each, "
            "comma-separated): make one with `python -c 'from cryptography.fernet import "
            "Fernet; print(Fernet.generate_key().decode())'`."
        ) from None
    return MultiFernet(fernets)


def encrypt(value: str, fernet: MultiFernet) -> str:
    return fernet.encrypt(value.encode()).decode("ascii")


def decrypt(token: str, fernet: MultiFernet) -> str:
    """The stored value; SecretError when no configured key opens it."""
    try:
        return fernet.decrypt(token.encode("ascii")).decode()
    except (InvalidToken, UnicodeError):
        raise SecretError(
            "the stored secret cannot be decrypted with SWITCHYARD_SECRETS_KEY (or the key "
            "derived from SECRET_KEY): was it stored under another key?"
        ) from None


@lru_cache(maxsize=4)
def _fernet_for(configured: str, secret_key: str) -> MultiFernet:
    return fernet_for(configured, secret_key=secret_key)


def _fernet() -> MultiFernet:
    return _fernet_for(settings.SWITCHYARD_SECRETS_KEY, settings.SECRET_KEY)


def seal(value: str) -> str:
    """`value` encrypted under the configured keys, to store."""
    return encrypt(value, _fernet())


def unseal(token: str) -> str:
    """A sealed value read back; SecretError when no configured key opens it."""
    return decrypt(token, _fernet())
