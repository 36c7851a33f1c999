"""A new chat opens with its character's greeting: the card's fields from the projector, made
into the payload of an `assistant/message` with form `greeting` (no model runs for it).

A greeting that cannot be fetched (the projector does not answer) is logged and left out: a
chat without its greeting still works, a failed creation would not."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from tavern_events.message import AssistantMessagePayload
from tavern_loop.domain.greeting import GREETING_FIELDS, greeting
from tavern_loop.domain.macros import MacroEnv
from tavern_loop.profiles.assets import FIELD_CHARS, Assets, AssetsUnavailable
from tavern_runtime.logs import get_logger

log = get_logger(__name__)

DEFAULT_CHARACTER = "Assistant"
DEFAULT_USER = "User"


async def greeting_payload(
    assets: Assets, clock: Callable[[], datetime]
) -> AssistantMessagePayload | None:
    """The greeting of the bound character (None: no character, no greeting, or unavailable)."""
    if assets.binding.character_id is None:
        return None
    try:
        fields = await assets.character(GREETING_FIELDS, FIELD_CHARS)
        persona = await assets.persona(FIELD_CHARS)
    except AssetsUnavailable as exc:
        log.warning("greeting_unavailable", session_id=assets.session_id, error=str(exc))
        return None
    if fields is None:
        return None
    env = MacroEnv(
        char=str(fields.get("name") or DEFAULT_CHARACTER),
        user=str((persona or {}).get("name") or DEFAULT_USER),
        now=clock(),
    )
    found = greeting(fields, env)
    if found is None:
        return None
    return AssistantMessagePayload(content=found.text, swipes=found.swipes or None)
