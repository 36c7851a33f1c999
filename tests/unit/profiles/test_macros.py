"""SillyTavern macros: names, time, randomness (seeded), and what is left alone."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tavern_loop.domain.macros import MacroEnv, expand

NOW = datetime(2026, 8, 14, 15, 5, tzinfo=UTC)
ENV = MacroEnv(
    char="Mira",
    user="Ren",
    now=NOW,
    seed=7,
    description="the apprentice",
    scenario="a storm",
    last_user_message="hello?",
    last_char_message="Mind the steps.",
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{{char}} greets {{user}}.", "Mira greets Ren."),
        ("<BOT> and <USER>", "Mira and Ren"),
        ("{{CHAR}}/{{charIfNotGroup}}", "Mira/Mira"),
        ("{{time}} on {{weekday}}, {{date}}", "3:05 PM on Friday, August 14, 2026"),
        ("{{isodate}} {{isotime}}", "2026-08-14 15:05"),
        ("{{time_UTC+2}}", "5:05 PM"),
        ("{{scenario}} / {{description}}", "a storm / the apprentice"),
        ("{{lastUserMessage}} | {{lastCharMessage}}", "hello? | Mind the steps."),
        ("a{{newline}}b{{noop}}", "a\nb"),
        ("keep\n\n{{trim}}\n\nthis", "keepthis"),
        ("{{// a note for authors}}x", "x"),
        ("{{unknown_macro}} stays", "{{unknown_macro}} stays"),
        ("{{roll:0d6}}", "{{roll:0d6}}"),
    ],
)
def test_macros_expand(text: str, expected: str) -> None:
    assert expand(text, ENV) == expected


def test_random_is_deterministic_for_a_seed_and_varies_with_it() -> None:
    text = "{{random::red::green::blue::gold}} {{random:a,b,c,d}} {{roll:2d6+1}}"
    first = expand(text, ENV)
    assert expand(text, ENV) == first
    colour, letter, roll = first.split()
    assert colour in {"red", "green", "blue", "gold"}
    assert letter in {"a", "b", "c", "d"}
    assert 3 <= int(roll) <= 13
    seen = {expand(text, MacroEnv("Mira", "Ren", NOW, seed=s)) for s in range(20)}
    assert len(seen) > 1


def test_pick_keeps_its_choice_for_the_same_seed_and_place() -> None:
    text = "{{pick::x::y::z}}"
    assert len({expand(text, ENV) for _ in range(5)}) == 1
