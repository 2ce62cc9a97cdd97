"""Secret storage: sealed with Fernet at rest (core/sealed.py), references to env and files
(integrations/secrets.py)."""

import os

import pytest
from cryptography.fernet import Fernet

from core import sealed
from integrations import secrets
from integrations.triton.restricted import NodeKey, NodeKeyError, check_header_name, check_key

VALUE = "k3y-value_0123456789abcdef"


def test_a_secret_round_trips_and_the_token_does_not_contain_it():
    fernet = sealed.fernet_for("", secret_key="django-secret")
    token = sealed.encrypt(VALUE, fernet)
    assert VALUE not in token
    assert sealed.decrypt(token, fernet) == VALUE


def test_the_derived_key_follows_secret_key_and_another_one_cannot_decrypt():
    assert sealed.derived_key("a") == sealed.derived_key("a") != sealed.derived_key("b")
    token = sealed.encrypt(VALUE, sealed.fernet_for("", secret_key="a"))
    with pytest.raises(secrets.SecretError) as err:
        sealed.decrypt(token, sealed.fernet_for("", secret_key="b"))
    assert VALUE not in str(err.value) and "SWITCHYARD_SECRETS_KEY" in str(err.value)


def test_a_configured_key_rotates_the_first_encrypts_every_one_decrypts():
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    token = sealed.encrypt(VALUE, sealed.fernet_for(old, secret_key="x"))
    rotated = sealed.fernet_for(f"{new}, {old}", secret_key="x")
    assert sealed.decrypt(token, rotated) == VALUE
    fresh = sealed.encrypt(VALUE, rotated)
    assert sealed.decrypt(fresh, sealed.fernet_for(new, secret_key="x")) == VALUE
    with pytest.raises(secrets.SecretError):
        sealed.decrypt(token, sealed.fernet_for(new, secret_key="x"))


def test_a_malformed_secrets_key_is_refused_with_how_to_make_one():
    with pytest.raises(secrets.SecretError, match="Fernet.generate_key"):
        sealed.fernet_for("not-a-fernet-key", secret_key="x")


@pytest.mark.parametrize(
    "ref",
    [
        "env:DJANGO_SECRET_KEY",
        "env:DATABASE_URL",
        "env:SWITCHYARD_NODE_KEYX",
        "env:switchyard_node_key_a",
        "file:relative/path",
        "file:/etc/passwd",
        "vault:thing",
        "",
        None,
    ],
)
def test_a_reference_may_name_only_node_key_variables_and_files_under_the_roots(ref, tmp_path):
    with pytest.raises(secrets.SecretError):
        secrets.check_ref(ref, file_roots=[str(tmp_path)])


def test_references_resolve_to_the_variable_or_the_file_without_its_newline(tmp_path, monkeypatch):
    monkeypatch.setenv("SWITCHYARD_NODE_KEY_PROD", VALUE)
    assert secrets.resolve_ref("env:SWITCHYARD_NODE_KEY_PROD", file_roots=[]) == VALUE
    path = tmp_path / "node-key"
    path.write_text(VALUE + "\n")
    assert secrets.resolve_ref(f"file:{path}", file_roots=[str(tmp_path)]) == VALUE


def test_an_unreadable_reference_says_what_without_a_value(tmp_path, monkeypatch):
    monkeypatch.delenv("SWITCHYARD_NODE_KEY_GONE", raising=False)
    with pytest.raises(secrets.SecretError, match="SWITCHYARD_NODE_KEY_GONE is not set"):
        secrets.resolve_ref("env:SWITCHYARD_NODE_KEY_GONE", file_roots=[])
    with pytest.raises(secrets.SecretError, match="cannot be read"):
        secrets.resolve_ref(f"file:{tmp_path}/missing", file_roots=[str(tmp_path)])
    # A link out of the roots is refused like the path it points at.
    outside = tmp_path.parent / f"outside-{os.getpid()}"
    outside.write_text(VALUE)
    try:
        (tmp_path / "link").symlink_to(outside)
        with pytest.raises(secrets.SecretError, match="outside the allowed folders"):
            secrets.resolve_ref(f"file:{tmp_path}/link", file_roots=[str(tmp_path)])
    finally:
        outside.unlink()


def test_node_keys_and_headers_triton_and_grpc_can_carry_only():
    for header in ("Switchyard-Node-Key", "a b", "", "x" * 64):
        with pytest.raises(NodeKeyError):
            check_header_name(header)
    for key in ("short", "has space in it 123", "colon:is:triton's:separator", "a,b" * 8):
        with pytest.raises(NodeKeyError) as err:
            check_key(key)
        assert key not in str(err.value)
    key = NodeKey("switchyard-node-key", VALUE)
    assert VALUE not in repr(key)
    assert key.grpc_headers() == {"triton-grpc-protocol-switchyard-node-key": VALUE}
    assert key.server_flags() == [
        f"--http-restricted-api=model-repository,shared-memory,trace,logging:"
        f"switchyard-node-key={VALUE}",
        f"--grpc-restricted-protocol=model-repository,shared-memory,trace,logging:"
        f"switchyard-node-key={VALUE}",
    ]
