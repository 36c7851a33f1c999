"""The `st` profile: SillyTavern-style prompt assembly, no tools, swipes and regenerations.

It runs in the same loop and writes the same events as agent-tavern; only the request differs.
The card, persona and activated world info come from the projector once per turn; a card that
cannot be loaded fails the turn (an st request without its card would be another prompt).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from tavern_loop.domain.macros import MacroEnv
from tavern_loop.domain.stchat import REGENERATE, SWIPE, ChatEntry, past_activations, st_chat
from tavern_loop.domain.stprompt import Card, LoreEntry, StInputs, assemble
from tavern_loop.options import ProfileOptions
from tavern_loop.profiles.assets import FIELD_CHARS, ST_CHARACTER_FIELDS, Assets, AssetsUnavailable
from tavern_loop.profiles.base import ProfileUnavailable, RequestPlan
from tavern_loop.sessionlog import HeldLog

DEFAULT_CHARACTER = "Assistant"
DEFAULT_USER = "User"
SCAN_MESSAGES = 20


@dataclass(frozen=True)
class _Loaded:
    card: Card
    user: str
    persona: str


class StProfile:
    label = "st"
    recall = False
    compacts = False

    def __init__(
        self, assets: Assets, options: ProfileOptions, clock: Callable[[], datetime]
    ) -> None:
        self.assets, self.options, self.clock = assets, options, clock
        self._loaded: _Loaded | None = None
        self._names: str | None = None

    async def plan(self, held: HeldLog, turn: int, window: int, form: str | None) -> RequestPlan:
        chat = st_chat(held.events)
        if form in (SWIPE, REGENERATE):
            chat = chat[:-1]  # the reply being replaced is not part of what is answered
        loaded = await self._load()
        timed = (len(chat), past_activations(held.events, st_chat(held.events)))
        lore = await self._lore(chat, loaded, turn, timed)
        group = held.state.binding.group
        members = await self._members(group.member_ids()) if group is not None else ""
        env = replace(self._env(loaded, chat, turn), group=members)
        inputs = StInputs(
            loaded.card,
            loaded.user,
            loaded.persona,
            lore,
            chat,
            env,
            self.options.st,
            window,
            group=group is not None,
        )
        prompt = assemble(inputs)
        record = {**prompt.record(), "lore": [e.id for e in lore]}
        params: dict[str, Any] = {"system": prompt.system, "profile": self.label, "st": record}
        return RequestPlan(prompt.system, [], prompt.messages(), params)

    async def _load(self) -> _Loaded:
        if self._loaded is None:
            try:
                fields = await self.assets.character(ST_CHARACTER_FIELDS, FIELD_CHARS)
                persona = await self.assets.persona(FIELD_CHARS)
            except AssetsUnavailable as exc:
                raise ProfileUnavailable(f"the st prompt needs the card: {exc}") from exc
            if fields is None and self.assets.binding.character_id is not None:
                raise ProfileUnavailable(f"no character {self.assets.binding.character_id!r}")
            card = Card.of(fields or {}, DEFAULT_CHARACTER)
            user = str((persona or {}).get("name") or DEFAULT_USER)
            self._loaded = _Loaded(card, user, str((persona or {}).get("description") or ""))
        return self._loaded

    async def _members(self, ids: Sequence[str]) -> str:
        """A group's member names, as SillyTavern's `{{group}}` lists them (a card out of
        reach by its id)."""
        if self._names is None:
            self._names = ", ".join([await self._member_name(cid) for cid in ids])
        return self._names

    async def _member_name(self, character_id: str) -> str:
        try:
            found = await self.assets.member(character_id)
        except AssetsUnavailable:
            found = None
        return found[0] if found else character_id

    async def _lore(
        self,
        chat: Sequence[ChatEntry],
        loaded: _Loaded,
        turn: int,
        timed: tuple[int, list[dict[str, Any]]],
    ) -> list[LoreEntry]:
        if self.assets.binding.character_id is None:
            return []
        said = [_said(e, loaded) for e in chat[-SCAN_MESSAGES:]]
        st = self.options.st
        try:
            found = await self.assets.lore(
                said, st.lore_tokens, st.scan_depth, _seed(self.assets.session_id, turn), timed
            )
        except AssetsUnavailable as exc:
            raise ProfileUnavailable(f"the st prompt needs world info: {exc}") from exc
        return [LoreEntry.of(raw) for raw in found]

    def _env(self, loaded: _Loaded, chat: Sequence[ChatEntry], turn: int) -> MacroEnv:
        card = loaded.card
        users = [e.text for e in chat if e.is_user]
        replies = [e.text for e in chat if not e.is_user]
        return MacroEnv(
            char=card.name,
            user=loaded.user,
            now=self.clock(),
            seed=_seed(self.assets.session_id, turn),
            description=card.description,
            personality=card.personality,
            scenario=card.scenario,
            persona=loaded.persona,
            mes_examples=card.mes_example,
            last_message=chat[-1].text if chat else "",
            last_user_message=users[-1] if users else "",
            last_char_message=replies[-1] if replies else "",
        )


def _said(entry: ChatEntry, loaded: _Loaded) -> dict[str, str]:
    name = entry.name or (loaded.user if entry.is_user else loaded.card.name)
    return {"name": name, "text": entry.text}


def _seed(session_id: str, turn: int) -> int:
    """Same session and turn, same rolls ({{random}}, lore probability)."""
    digest = hashlib.sha256(f"{session_id}#{turn}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1
