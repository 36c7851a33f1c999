"""How far a session's memory reaches, and the ledger scope that follows from its binding.

Other services compute the same scope id to follow `tavern.ledger.<scope>.>` for a chat or a
character: a private chat's scope is its chat id; a character's is derived from the character
(and its owner), so every chat with that character shares it.
"""

from __future__ import annotations

import hashlib
from typing import Literal

MemoryReach = Literal["chat", "character", "agent"]
LOCAL_OWNER = "local"
"""The default owner: of a single-user install, of what the operator makes, and of everything
recorded before owners were. Its derived scopes are those made before owners existed."""
DEFAULT_REACH: MemoryReach = "character"
"""What a session remembers without a word about it: what was said in any chat with the same
character. A session without a character falls back to its chat."""


def reach_of(reach: MemoryReach | None, character_id: str | None) -> MemoryReach:
    """The reach in force: the asked one, else the default; `character` needs a character."""
    found = reach or DEFAULT_REACH
    return "chat" if found == "character" and not character_id else found


def memory_scope(
    *,
    chat_id: str,
    character_id: str | None,
    agent_id: str,
    reach: MemoryReach | None,
    owner: str | None = None,
) -> str:
    """The ledger scope of a session's evidence: its chat, its character's or its agent's
    (an id of the subject alphabet, 28 characters for the derived ones)."""
    found = reach_of(reach, character_id)
    if found == "chat":
        return chat_id
    if found == "character":
        return "chr-" + _digest("character", owner, character_id or "")
    return "agt-" + _digest("agent", owner, agent_id)


def _digest(kind: str, owner: str | None, key: str) -> str:
    mine = "" if owner in (None, LOCAL_OWNER) else owner  # the local owner's stay as they were
    material = "\x1f".join((kind, mine or "", key)).encode()
    return hashlib.blake2b(material, digest_size=12).hexdigest()
