"""A new chat's first message: the card's greeting, as SillyTavern opens a chat (pure).

SillyTavern's `getFirstMessage`: the text is `first_mes`; with alternate greetings the swipes
are `[first_mes, *alternate_greetings]` (an empty `first_mes` drops out, the first alternate
is shown). The shown text has its macros expanded (SillyTavern substitutes the first message
before it is sent or shown); the swipes stay as the card wrote them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tavern_loop.domain.macros import MacroEnv, expand

GREETING = "greeting"
GREETING_FIELDS = ("name", "first_mes", "alternate_greetings")


@dataclass(frozen=True)
class Greeting:
    text: str
    swipes: tuple[str, ...] = ()


def greeting(fields: Mapping[str, Any], env: MacroEnv) -> Greeting | None:
    """The greeting of a card's fields, or None when the card has none."""
    first = fields.get("first_mes")
    first = first if isinstance(first, str) else ""
    alternates = fields.get("alternate_greetings")
    others = [a for a in alternates if isinstance(a, str)] if isinstance(alternates, list) else []
    if not others:
        return Greeting(expand(first, env)) if first.strip() else None
    swipes = [first, *others] if first else others
    if not swipes[0].strip():
        return None
    return Greeting(expand(swipes[0], env), tuple(swipes))
