"""Principal tokens and the ownership rule, without IO: mint, verify, forge, expire."""

from __future__ import annotations

import pytest

from tavern_runtime import principals
from tavern_runtime.errors import Forbidden, Unauthenticated
from tavern_runtime.principals import OPERATOR, Principal, authorize, may_act, mint, verify

KEY = b"k" * 32
OTHER_KEY = b"o" * 32
NOW = 1_800_000_000.0


def test_a_minted_token_verifies_to_its_principal() -> None:
    for p in (principals.user("alice"), principals.service("loop"), OPERATOR):
        assert verify(mint(p, KEY, NOW), KEY, NOW + 1) == p


def test_a_service_acting_for_a_user_carries_the_user() -> None:
    p = principals.service("loop").acting_for("alice")
    found = verify(mint(p, KEY, NOW), KEY, NOW)
    assert found.on_behalf_of == "alice"
    assert found.user == "alice"
    assert found.label == "service:loop for user:alice"


def test_an_expired_token_is_refused() -> None:
    token = mint(principals.user("alice"), KEY, NOW, ttl_s=60)
    with pytest.raises(Unauthenticated, match="expired"):
        verify(token, KEY, NOW + 60)


def test_a_token_signed_with_another_key_is_refused() -> None:
    token = mint(principals.user("alice"), OTHER_KEY, NOW)
    with pytest.raises(Unauthenticated, match="signature"):
        verify(token, KEY, NOW)


def test_changed_claims_break_the_signature() -> None:
    version, _, mac = mint(principals.user("bob"), KEY, NOW).split(".")
    forged_claims = mint(OPERATOR, OTHER_KEY, NOW).split(".")[1]
    with pytest.raises(Unauthenticated, match="signature"):
        verify(f"{version}.{forged_claims}.{mac}", KEY, NOW)


@pytest.mark.parametrize(
    "token", ["", "v1", "v1.a.b.c", "v2.e30.AAAA", "v1.!!!.???", "x" * 5000, "v1..", "v1.e30."]
)
def test_malformed_tokens_are_refused(token: str) -> None:
    with pytest.raises(Unauthenticated):
        verify(token, KEY, NOW)


def test_a_token_claiming_too_long_a_life_is_refused() -> None:
    import base64
    import hashlib
    import hmac
    import json

    claims = {"k": "user", "sub": "alice", "exp": int(NOW + 10 * principals.MAX_TTL_S)}
    raw = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    body = f"v1.{raw}"
    mac = hmac.new(KEY, body.encode(), hashlib.sha256).digest()
    token = f"{body}.{base64.urlsafe_b64encode(mac).rstrip(b'=').decode()}"
    with pytest.raises(Unauthenticated, match="longer"):
        verify(token, KEY, NOW)


def test_a_missing_header_is_unauthenticated() -> None:
    with pytest.raises(Unauthenticated, match="no principal"):
        principals.from_headers({}, KEY, NOW)
    with pytest.raises(Unauthenticated):
        principals.from_headers(None, KEY, NOW)


def test_names_and_keys_are_checked_when_minting() -> None:
    with pytest.raises(ValueError, match="name"):
        mint(principals.user("a.b"), KEY, NOW)
    with pytest.raises(ValueError, match="only a service"):
        mint(Principal("user", "alice", "bob"), KEY, NOW)
    with pytest.raises(ValueError, match="32 bytes"):
        mint(principals.user("alice"), b"short", NOW)


def test_users_act_only_on_what_they_own() -> None:
    alice, bob = principals.user("alice"), principals.user("bob")
    assert may_act(alice, "alice")
    assert not may_act(bob, "alice")
    assert not may_act(alice, None)
    with pytest.raises(Forbidden, match="user:bob"):
        authorize(bob, "alice", "session s1")


def test_the_operator_acts_on_anything_and_services_when_not_acting_for_a_user() -> None:
    assert may_act(OPERATOR, "alice")
    assert may_act(OPERATOR, None)
    assert may_act(principals.service("consolidator"), "alice")
    loop_for_bob = principals.service("loop").acting_for("bob")
    assert not may_act(loop_for_bob, "alice")
    assert may_act(loop_for_bob, "bob")


def test_operator_only_operations_refuse_everyone_else() -> None:
    principals.require_operator(OPERATOR, "import")
    for p in (principals.user("alice"), principals.service("loop")):
        with pytest.raises(Forbidden, match="needs the operator"):
            principals.require_operator(p, "import")


def test_what_the_operator_creates_belongs_to_the_local_owner() -> None:
    assert OPERATOR.owner == principals.LOCAL_OWNER
    assert principals.user("alice").owner == "alice"
