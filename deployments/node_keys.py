"""A cluster's node key: the value its Triton nodes' restricted APIs ask for (docs/operations.md,
"Node keys"). Stored encrypted (`api_key_ciphertext`) or as a reference (`api_key_ref`); a
cluster with neither uses SWITCHYARD_TRITON_DEFAULT_KEY_REF. The value leaves this module
only inside a NodeKey (its repr hides it) and is never logged, audited or answered.
"""

from __future__ import annotations

from django.conf import settings

from core.sealed import seal, unseal
from integrations import secrets
from integrations.triton.restricted import NodeKey, NodeKeyError, check_key


class NodeKeyUnavailable(Exception):
    """The cluster's key is set but cannot be read now; the message says why, not the value."""


def stored_fields(*, api_key: str | None, api_key_ref: str | None) -> dict[str, str]:
    """The cluster columns for a key given as a value or a reference ("" clears both).

    Raises NodeKeyError or secrets.SecretError (messages without the value).
    """
    if api_key and api_key_ref:
        raise NodeKeyError("Give the key or a reference to it, not both.")
    if api_key:
        check_key(api_key)
        return {"api_key_ciphertext": seal(api_key), "api_key_ref": ""}
    if api_key_ref:
        secrets.check_ref(api_key_ref, file_roots=settings.SWITCHYARD_SECRET_FILE_ROOTS)
        return {"api_key_ciphertext": "", "api_key_ref": api_key_ref}
    return {"api_key_ciphertext": "", "api_key_ref": ""}


def cluster_node_key(cluster) -> NodeKey | None:
    """The key to send to the cluster's nodes; None when neither it nor the default has one."""
    ref = cluster.api_key_ref or settings.SWITCHYARD_TRITON_DEFAULT_KEY_REF
    try:
        if cluster.api_key_ciphertext:
            value = unseal(cluster.api_key_ciphertext)
        elif ref:
            value = secrets.resolve_ref(ref, file_roots=settings.SWITCHYARD_SECRET_FILE_ROOTS)
        else:
            return None
        return NodeKey(settings.SWITCHYARD_TRITON_KEY_HEADER, value)
    except (secrets.SecretError, NodeKeyError) as exc:
        raise NodeKeyUnavailable(f"the node key of cluster {cluster.name}: {exc}") from None
