"""A new chat's greeting as SillyTavern's getFirstMessage makes it (pure)."""

from __future__ import annotations

from datetime import UTC, datetime

from tavern_loop.domain.greeting import Greeting, greeting
from tavern_loop.domain.macros import MacroEnv

ENV = MacroEnv(char="Mira", user="Ren", now=datetime(2026, 12, 1, 21, 20, tzinfo=UTC))


def test_first_mes_with_its_macros_expanded() -> None:
    found = greeting({"first_mes": "{{char}} opens the door for {{user}}. <USER>?"}, ENV)
    assert found == Greeting("Mira opens the door for Ren. Ren?")


def test_alternate_greetings_are_swipes_as_the_card_wrote_them() -> None:
    fields = {"first_mes": "Hello {{user}}.", "alternate_greetings": ["Evening, {{user}}.", 3]}
    found = greeting(fields, ENV)
    assert found == Greeting("Hello Ren.", ("Hello {{user}}.", "Evening, {{user}}."))


def test_an_empty_first_mes_gives_way_to_the_first_alternate() -> None:
    found = greeting({"first_mes": "", "alternate_greetings": ["Evening, {{user}}."]}, ENV)
    assert found == Greeting("Evening, Ren.", ("Evening, {{user}}.",))


def test_no_greeting_without_text() -> None:
    assert greeting({"first_mes": "  "}, ENV) is None
    assert greeting({}, ENV) is None
    assert greeting({"first_mes": "", "alternate_greetings": []}, ENV) is None
