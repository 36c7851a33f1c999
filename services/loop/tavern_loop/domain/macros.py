"""SillyTavern macros (pure): `{{char}}`, `{{user}}`, `{{random}}`, `{{time}}` and the common ones.

Time and randomness come from the environment (`now`, `seed`), so the same text, environment
and seed always expand the same way. Unknown macros are left as written, as SillyTavern does.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

_MACRO = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_TRIM = re.compile(r"\s*\{\{trim\}\}\s*", re.IGNORECASE)
_LEGACY = {"<USER>": "user", "<BOT>": "char", "<CHAR>": "char"}
_ROLL = re.compile(r"^(\d*)d(\d+)([+-]\d+)?$", re.IGNORECASE)
_OFFSET = re.compile(r"^(time|date)_utc([+-]\d{1,2})$", re.IGNORECASE)
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


@dataclass(frozen=True)
class MacroEnv:
    char: str
    user: str
    now: datetime
    seed: int = 0
    description: str = ""
    personality: str = ""
    scenario: str = ""
    persona: str = ""
    mes_examples: str = ""
    last_message: str = ""
    last_user_message: str = ""
    last_char_message: str = ""
    original: str = ""
    """What `{{original}}` stands for in a card's own system prompt (the default main prompt)."""
    group: str = ""
    """A group chat's members, `Mira, Cael, Oren` (`{{group}}`, `{{charIfNotGroup}}`); empty
    outside a group, where both stand for `{{char}}`."""


def expand(text: str, env: MacroEnv) -> str:
    """`text` with every known macro replaced."""
    if "{{" not in text and "<" not in text:
        return text
    rng = random.Random(env.seed)
    for legacy, name in _LEGACY.items():
        text = text.replace(legacy, "{{" + name + "}}")
    text = _TRIM.sub("", text)
    return _MACRO.sub(lambda m: _one(m.group(1), m.start(), env, rng, m.group(0)), text)


def _one(body: str, offset: int, env: MacroEnv, rng: random.Random, raw: str) -> str:
    name, _, rest = body.strip().partition(":")
    key = name.strip().lower()
    if key.startswith("//"):
        return ""
    simple = _SIMPLE.get(key)
    if simple is not None:
        return simple(env)
    if key in ("random", "pick"):
        options = _options(rest)
        if not options:
            return ""
        if key == "pick":
            return options[_stable_index(env.seed, body, offset, len(options))]
        return options[rng.randrange(len(options))]
    if key == "roll":
        return _roll(rest.strip(), rng) or raw
    return _timed(key, env) or raw


_SIMPLE: dict[str, Callable[[MacroEnv], str]] = {
    "char": lambda e: e.char,
    "charifnotgroup": lambda e: e.group or e.char,
    "group": lambda e: e.group or e.char,
    "user": lambda e: e.user,
    "persona": lambda e: e.persona,
    "description": lambda e: e.description,
    "personality": lambda e: e.personality,
    "scenario": lambda e: e.scenario,
    "mesexamples": lambda e: e.mes_examples,
    "mesexamplesraw": lambda e: e.mes_examples,
    "lastmessage": lambda e: e.last_message,
    "lastusermessage": lambda e: e.last_user_message,
    "input": lambda e: e.last_user_message,
    "lastcharmessage": lambda e: e.last_char_message,
    "original": lambda e: e.original,
    "newline": lambda e: "\n",
    "noop": lambda e: "",
    "time": lambda e: clock_time(e.now),
    "date": lambda e: long_date(e.now),
    "weekday": lambda e: WEEKDAYS[e.now.weekday()],
    "isotime": lambda e: e.now.strftime("%H:%M"),
    "isodate": lambda e: e.now.strftime("%Y-%m-%d"),
}


def _options(rest: str) -> list[str]:
    """`{{random::a::b}}` (double colons) or `{{random:a,b}}` (commas)."""
    if rest.startswith(":"):
        return [o for o in rest[1:].split("::")]
    return [o.strip() for o in rest.split(",")] if rest.strip() else []


def _stable_index(seed: int, body: str, offset: int, count: int) -> int:
    """`{{pick}}` keeps its choice for the same seed, text and position (ST's stable pick)."""
    digest = hashlib.sha256(f"{seed}\x00{body}\x00{offset}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % count


def _roll(formula: str, rng: random.Random) -> str | None:
    match = _ROLL.match(formula if "d" in formula.lower() else f"d{formula}")
    if match is None:
        return None
    count, sides = int(match.group(1) or 1), int(match.group(2))
    if not 1 <= count <= 100 or not 1 <= sides <= 10_000:
        return None
    total = sum(rng.randint(1, sides) for _ in range(count)) + int(match.group(3) or 0)
    return str(total)


def _timed(key: str, env: MacroEnv) -> str | None:
    """`{{time_UTC+2}}` / `{{date_UTC-5}}`: the clock in a fixed offset from UTC."""
    match = _OFFSET.match(key)
    if match is None:
        return None
    shifted = env.now.astimezone(timezone(timedelta(hours=int(match.group(2)))))
    return clock_time(shifted) if match.group(1) == "time" else long_date(shifted)


def clock_time(now: datetime) -> str:
    """`3:05 PM`, as SillyTavern's `{{time}}` (moment's `LT`)."""
    hour = now.hour % 12 or 12
    return f"{hour}:{now.minute:02d} {'PM' if now.hour >= 12 else 'AM'}"


def long_date(now: datetime) -> str:
    """`August 14, 2026`, as SillyTavern's `{{date}}` (moment's `LL`)."""
    return f"{MONTHS[now.month - 1]} {now.day}, {now.year}"
