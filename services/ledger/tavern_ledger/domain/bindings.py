"""What a session event means for the stores: a binding, a mode change, a closed turn."""

from __future__ import annotations

from dataclasses import dataclass

from tavern_events.session import SessionBindingChanged, SessionCreated
from tavern_events.turn import TurnEnded
from tavern_ledger.domain.scopes import Binding


@dataclass(frozen=True)
class ModeChange:
    session_id: str
    architecture: str
    context_mode: str | None
    seq: int


@dataclass(frozen=True)
class TurnClosed:
    session_id: str
    turn: int


Effect = Binding | ModeChange | TurnClosed


def effect_of(event: object) -> Effect | None:
    """The stores' reading of a session event; None for events they ignore."""
    if isinstance(event, SessionCreated):
        return binding_of(event)
    if isinstance(event, SessionBindingChanged):
        p = event.payload
        return ModeChange(event.session_id, p.to_architecture, p.to_context_mode, event.seq)
    if isinstance(event, TurnEnded):
        return TurnClosed(event.session_id, event.turn)
    return None


def binding_of(event: SessionCreated) -> Binding:
    p = event.payload
    return Binding(
        session_id=event.session_id,
        architecture=p.architecture,
        context_mode=p.context_mode,
        chat_id=p.chat_id,
        character_id=p.character_id,
        persona_id=p.persona_id,
        agent_id=p.agent_id,
        parent_session_id=p.parent_session_id,
        updated_seq=event.seq,
        memory_reach=p.memory_reach,
        owner=p.owner,
    )
