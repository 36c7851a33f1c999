"""The gateway's account rules, without IO: names, passwords, secrets, who an account acts as."""

from __future__ import annotations

import pytest

from tavern_gateway import accounts
from tavern_gateway.accounts import Account
from tavern_runtime.errors import ValidationFailed


def test_names_are_principal_names_and_the_reserved_ones_are_refused() -> None:
    assert accounts.check_name("uma_2") == "uma_2"
    for bad in ("", "a b", "x" * 65, "ünï", "local", "Operator"):
        with pytest.raises(ValidationFailed):
            accounts.check_name(bad)


def test_passwords_are_argon2id_hashes_that_verify_only_the_password() -> None:
    stored = accounts.hash_password("correct horse battery")
    assert stored.startswith("$argon2id$")
    assert "correct horse" not in stored
    assert accounts.verify_password(stored, "correct horse battery")
    assert not accounts.verify_password(stored, "correct horse batterY")
    assert not accounts.verify_password("not a hash", "correct horse battery")
    with pytest.raises(ValidationFailed):
        accounts.hash_password("short")


def test_secrets_are_random_and_stored_as_digests() -> None:
    one, two = accounts.new_secret(), accounts.new_secret()
    assert one != two
    assert len(one) >= 43
    assert accounts.digest(one) != accounts.digest(two)
    assert len(accounts.digest(one)) == 32


def test_the_owner_acts_as_local_and_an_invited_user_as_themselves() -> None:
    assert accounts.principal_name_for("ada", "owner") == "local"
    assert accounts.principal_name_for("uma", "user") == "uma"
    owner = Account("ada", "local", "owner")
    assert owner.principal.label == "user:local"
    assert owner.is_owner
    assert not Account("uma", "uma", "user").is_owner


def test_sign_in_attempts_are_counted_per_ipv4_address_and_ipv6_slash_64() -> None:
    assert accounts.client_key("203.0.113.7") == "203.0.113.7"
    assert accounts.client_key("::ffff:203.0.113.7") == "203.0.113.7"
    assert accounts.client_key("2001:db8:1:2:aaaa::1") == accounts.client_key("2001:db8:1:2::ff")
    assert accounts.client_key("2001:db8:1:2::1") != accounts.client_key("2001:db8:1:3::1")
    assert accounts.client_key("") == "unknown"


def test_an_invitee_acts_as_a_fresh_principal_not_their_chosen_name() -> None:
    assert accounts.invitee_principal("ab12") == "w-ab12"
    assert accounts.check_name(accounts.invitee_principal("0" * 24))
