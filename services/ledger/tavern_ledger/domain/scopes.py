"""Scopes: what a session may address, derived from its binding and never from arguments."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tavern_events.reach import MemoryReach, memory_scope
from tavern_ledger.toolcalls.errors import ScopeForbidden, ScopeUnavailable

GLOBAL_ID = "global"


@dataclass(frozen=True)
class Binding:
    """A row of `ledger.session_binding`: what a session is bound to."""

    session_id: str
    architecture: str
    context_mode: str | None
    chat_id: str
    character_id: str | None
    persona_id: str | None
    agent_id: str
    parent_session_id: str | None
    updated_seq: int
    memory_reach: MemoryReach | None = None
    owner: str = "local"


@dataclass(frozen=True)
class Scopes:
    """The scope ids one session may use. `agent` is the session's own agent memory (the
    session id), so agents of different sessions never share it; `character` may be absent."""

    chat: str
    character: str | None
    agent: str


@dataclass(frozen=True)
class ScopeKey:
    """Where a record lives: `(scope, scope_id)`, plus the turn for turn-scope variables."""

    scope: str
    scope_id: str
    turn: int = 0


def evidence_scope_of(binding: Binding) -> str:
    """The ledger scope of the session's evidence (what recall reads)."""
    return memory_scope(
        chat_id=binding.chat_id,
        character_id=binding.character_id,
        agent_id=binding.agent_id,
        reach=binding.memory_reach,
        owner=binding.owner,
    )


def scopes_of(binding: Binding) -> Scopes:
    return Scopes(chat=binding.chat_id, character=binding.character_id, agent=binding.session_id)


def scope_key(
    scopes: Scopes, scope: str, *, session_id: str, turn: int, global_enabled: bool
) -> ScopeKey:
    """The key of `scope` for this session; refuses a scope the session has not got."""
    if scope == "turn":
        return ScopeKey("turn", session_id, turn)
    if scope == "global":
        if not global_enabled:
            raise ScopeUnavailable("the global scope is disabled in this deployment")
        return ScopeKey("global", GLOBAL_ID)
    scope_id = {"chat": scopes.chat, "character": scopes.character, "agent": scopes.agent}.get(
        scope
    )
    if scope_id is None:
        raise ScopeUnavailable(f"this session has no {scope} scope")
    return ScopeKey(scope, scope_id)


def readable_keys(scopes: Scopes, *, global_enabled: bool) -> list[ScopeKey]:
    """Every memory scope the session may search, in order."""
    keys = [ScopeKey("chat", scopes.chat)]
    if scopes.character is not None:
        keys.append(ScopeKey("character", scopes.character))
    keys.append(ScopeKey("agent", scopes.agent))
    if global_enabled:
        keys.append(ScopeKey("global", GLOBAL_ID))
    return keys


def owns(scopes: Scopes, key: ScopeKey, *, global_enabled: bool) -> bool:
    """Whether a record stored under `key` belongs to one of the session's scopes."""
    return key in readable_keys(scopes, global_enabled=global_enabled)


def forged_claims(
    scopes: Scopes, scope: str | None, claims: Mapping[str, str | None]
) -> dict[str, str]:
    """Scope ids a request named that are not its session's own (empty when none were named).

    `scope_id` is checked against the addressed scope; `chat_id`/`character_id` against the
    binding. The tools never send these: a request that does is probing another session.
    """
    own = {"chat_id": scopes.chat, "character_id": scopes.character}
    forged: dict[str, str] = {}
    for name, value in claims.items():
        if value is None:
            continue
        expected = _scope_id_of(scopes, scope) if name == "scope_id" else own.get(name)
        if value != expected:
            forged[name] = value
    return forged


def _scope_id_of(scopes: Scopes, scope: str | None) -> str | None:
    return {
        "chat": scopes.chat,
        "character": scopes.character,
        "agent": scopes.agent,
        "global": GLOBAL_ID,
    }.get(scope or "")


def refuse_forged(forged: Mapping[str, str]) -> ScopeForbidden:
    named = ", ".join(f"{k}={v!r}" for k, v in sorted(forged.items()))
    return ScopeForbidden(
        f"the request names a scope that is not this session's ({named}); "
        "scopes come from the session binding"
    )
