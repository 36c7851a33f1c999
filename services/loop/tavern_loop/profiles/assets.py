"""The projector's read models as a profile sees them: card, persona and lore of a session.

Ids come from the session binding the loop holds (not from the projector's sessions read model,
which may lag behind a session created a moment ago).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tavern_events import subjects
from tavern_loop.domain.state import Binding
from tavern_loop.tools.base import RpcCall

RPC_TIMEOUT_S = 3.0
ST_CHARACTER_FIELDS = (
    "name",
    "description",
    "personality",
    "scenario",
    "mes_example",
    "system_prompt",
    "post_history_instructions",
)
IDENTITY_FIELDS = ("name", "nickname", "identity_summary", "description")
FIELD_CHARS = 8000


class AssetsUnavailable(Exception):
    """The projector did not answer, or refused for a reason other than a missing asset."""


@dataclass(frozen=True)
class Assets:
    rpc: RpcCall
    session_id: str
    binding: Binding

    async def character(self, fields: tuple[str, ...], max_chars: int) -> dict[str, Any] | None:
        """The bound character's fields (None: no character bound, or no such card)."""
        if self.binding.character_id is None:
            return None
        return await self._fields("character", self.binding.character_id, fields, max_chars)

    async def member(self, character_id: str) -> tuple[str, str | None] | None:
        """A group chat member's name and card file (SillyTavern's avatar), by id; None: no
        such card."""
        body = {
            "session_id": self.session_id,
            "character": character_id,
            "kind": "character",
            "fields": ["name"],
            "max_chars": 128,
        }
        reply = await self._call("character.get", body)
        if reply is None:
            return None
        name, avatar = reply.get("name"), reply.get("avatar")
        if not isinstance(name, str) or not name.strip():
            return None
        return name, avatar if isinstance(avatar, str) else None

    async def persona(self, max_chars: int) -> dict[str, Any] | None:
        if self.binding.persona_id is None:
            return None
        return await self._fields(
            "persona", self.binding.persona_id, ("name", "description"), max_chars
        )

    async def _fields(
        self, kind: str, asset: str, fields: tuple[str, ...], max_chars: int
    ) -> dict[str, Any] | None:
        body = {
            "session_id": self.session_id,
            "character": asset,
            "kind": kind,
            "fields": list(fields),
            "max_chars": max_chars,
        }
        reply = await self._call("character.get", body)
        if reply is None:
            return None
        found = reply.get("fields")
        return found if isinstance(found, dict) else {}

    async def lore(
        self,
        messages: list[dict[str, str]],
        max_tokens: int,
        scan_depth: int,
        seed: int,
        timed: tuple[int, list[dict[str, Any]]] | None = None,
    ) -> list[dict[str, Any]]:
        """World-info entries the messages activate (the character's books); `timed` is the
        chat's length and its earlier activations, for delay, sticky and cooldown."""
        books = [self.binding.character_id] if self.binding.character_id else []
        body: dict[str, Any] = {
            "session_id": self.session_id,
            "messages": messages,
            "books": books,
            "scan_depth": scan_depth,
            "max_tokens": max_tokens,
            "limit": 50,
            "seed": seed,
        }
        if timed is not None:
            body |= {"message_count": timed[0], "activations": timed[1]}
        reply = await self._call("lore.search", body)
        entries = (reply or {}).get("entries")
        return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []

    async def _call(self, operation: str, body: dict[str, Any]) -> dict[str, Any] | None:
        reply = await self.rpc(subjects.rpc("projector", operation), body, RPC_TIMEOUT_S)
        error = reply.get("error") if isinstance(reply, dict) else {"message": "no reply"}
        if not error:
            return reply
        if isinstance(error, dict) and error.get("code") == "not_found":
            return None
        message = error.get("message") if isinstance(error, dict) else str(error)
        raise AssetsUnavailable(f"projector {operation}: {message}")
