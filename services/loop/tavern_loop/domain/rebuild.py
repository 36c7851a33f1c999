"""Rebuilding a model request from the session log alone (pure).

`agent/request` records the system prompt it sent (and, for `st`, the parts of the prompt that
are not chat history); the history is folded from the log before it, through the
`request/projection` recorded for that request in agent-managed mode. Same log, same request.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tavern_events.envelope import SessionEvent
from tavern_events.request import AgentRequest, RequestProjection
from tavern_loop.domain.groupchat import for_member, others_recall
from tavern_loop.domain.history import Message, surface_of
from tavern_loop.domain.projection import project
from tavern_loop.domain.stchat import st_chat
from tavern_loop.domain.stprompt import rebuild_st


class RebuildError(ValueError):
    """The log does not hold what the request needs (or contradicts it)."""


def rebuild_request(log: Sequence[SessionEvent], agent_request_seq: int) -> list[Message]:
    """The exact messages (system first) of the model request logged at `agent_request_seq`."""
    request = _request_at(log, agent_request_seq)
    before = [e for e in log if e.seq < agent_request_seq]
    params: dict[str, Any] = dict(request.payload.params)
    system: Message = {"role": "system", "content": params.get("system", "")}
    if isinstance(params.get("st"), dict):
        return [system, *rebuild_st(st_chat(before), params["st"])]
    history = _history(before)
    speaker = params.get("speaker")
    if isinstance(speaker, str):  # a group member's request: the others' lines named
        member = params.get("speaker_id")  # set when each member's recall is its own
        hidden = others_recall(before, member) if isinstance(member, str) else frozenset()
        history = for_member(history, speaker, hidden)
    return [system, *history]


def _request_at(log: Sequence[SessionEvent], seq: int) -> AgentRequest:
    for event in log:
        if event.seq == seq:
            if not isinstance(event, AgentRequest):
                raise RebuildError(f"seq {seq} is a {event.type}, not an agent/request")
            return event
    raise RebuildError(f"the log has no seq {seq}")


def _history(before: Sequence[SessionEvent]) -> list[Message]:
    surface = surface_of(before)
    projection = projection_for(before)
    if projection is None:
        return surface.messages()
    if projection.payload.surface_generation != surface.generation:
        raise RebuildError("the projection was made on another surface generation")
    return project(surface.nodes(), projection.payload.included_seqs)


def projection_for(before: Sequence[SessionEvent]) -> RequestProjection | None:
    """The projection recorded for the next request: after the previous request, if any."""
    for event in reversed(before):
        if isinstance(event, AgentRequest):
            return None
        if isinstance(event, RequestProjection):
            return event
    return None
