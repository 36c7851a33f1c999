"""Whose card a new session may bind (`tavern_loop.domain.access.foreign_character`)."""

from __future__ import annotations

from tavern_loop.domain.access import foreign_character
from tavern_runtime import principals

BOB = principals.user("bob")


def test_a_user_may_not_bind_another_users_card() -> None:
    refusal = foreign_character(BOB, "bob", {"mira-1a2b": "alice"})
    assert refusal is not None
    assert "no character 'mira-1a2b' of yours" in refusal


def test_a_user_binds_their_own_cards_and_cards_not_known_yet() -> None:
    assert foreign_character(BOB, "bob", {"mira-9f": "bob", "new-card": None}) is None
    assert foreign_character(BOB, "bob", {}) is None


def test_the_operator_binds_any_card() -> None:
    assert foreign_character(principals.OPERATOR, "local", {"mira-1a2b": "alice"}) is None


def test_one_foreign_member_of_a_group_refuses_the_binding() -> None:
    owners: dict[str, str | None] = {"a-card": "bob", "b-card": "alice"}
    assert foreign_character(BOB, "bob", owners) is not None
