"""Command turns: `/compact`, `/create`, `/mode`, `/fork`, `/swipe`,
`/regenerate`, and in a group chat `/speak`, `/member`, `/group`.

A command is claimed alone, so it always runs at an idle turn boundary. A refused command ends
its turn `rejected` with the reason (nothing else changes); an accepted one records what it did
(`session/binding-changed`, `session/forked`, a reply with form `swipe`/`regenerate`,
`context/compacted` or `context/compaction-skipped`) and ends `completed`, with what happened
in words in the turn's `reason`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from tavern_events.context import ContextCompactionSkipped
from tavern_events.envelope import SessionEvent
from tavern_events.input import CommandInput
from tavern_events.session import (
    SessionBindingChanged,
    SessionCreated,
    SessionForked,
    SessionForkedPayload,
)
from tavern_events.turn import TurnEnded
from tavern_loop.domain.binding import Fork, Refusal, fork_binding, mode_change
from tavern_loop.domain.drafts import Drafter
from tavern_loop.domain.groupcommands import NOT_A_GROUP, group_change, member_change
from tavern_loop.domain.speakers import Choice
from tavern_loop.domain.stchat import REGENERATE, SWIPE, reply_target, st_chat
from tavern_loop.inputs import PendingInput
from tavern_loop.options import LoopOptions
from tavern_loop.profiles import Profile
from tavern_loop.sessionlog import HeldLog
from tavern_runtime.errors import ConcurrencyConflict
from tavern_runtime.logs import get_logger

log = get_logger(__name__)


class CommandDeps(Protocol):
    @property
    def new_id(self) -> Callable[[], str]: ...

    @property
    def options(self) -> LoopOptions: ...


class TurnRunner(Protocol):
    """What a command needs of the turn that runs it (`tavern_loop.turn.TurnRunner` is one).
    Declared here, so the commands do not import the turn that imports them."""

    held: HeldLog
    creation: Creation | None
    draft: Drafter
    profile: Profile
    choice: Choice | None

    @property
    def deps(self) -> CommandDeps: ...

    def stage(self, *events: SessionEvent) -> Sequence[SessionEvent]: ...

    async def end(self, outcome: str, reason: str | None = None) -> TurnEnded: ...

    async def compact(
        self,
        trigger: str,
        retain_tokens: int,
        limit: int | None = None,
        input_id: str | None = None,
    ) -> bool: ...

    async def reply_turn(self, form: str) -> TurnEnded: ...

    async def group_replies(
        self, messages: list[PendingInput], speakers: tuple[str, ...], form: str | None = None
    ) -> TurnEnded: ...


Handler = Callable[[TurnRunner, CommandInput], Awaitable[TurnEnded]]


@dataclass(frozen=True)
class Creation:
    """The session was created by this turn's `create` command; `refusal` says why the
    requested binding was not used (the configured defaults were)."""

    refusal: str | None = None


async def run_command(turn: TurnRunner, command: CommandInput) -> TurnEnded:
    handler = HANDLERS.get(command.payload.name)
    if handler is None:
        known = ", ".join(f"/{name}" for name in HANDLERS)
        return await turn.end(
            "rejected", f"unknown command /{command.payload.name}; known: {known}"
        )
    return await handler(turn, command)


COMPACT_USAGE = "Usage: /compact (no arguments)"
"""As in DSH: `/compact` always compacts as far as it can (nothing is retained but the newest
exchange, whatever the token pressure), so it has no variants to ask for."""


async def _compact(turn: TurnRunner, command: CommandInput) -> TurnEnded:
    if command.payload.args:
        return await turn.end("rejected", COMPACT_USAGE)
    if not turn.profile.compacts:
        return await turn.end(
            "rejected", "st sessions are not compacted: their history is fitted to the window"
        )
    if await turn.compact("command", retain_tokens=0, input_id=command.input_id):
        return await turn.end("completed", "compacted")
    skipped = [e for e in turn.held.events if isinstance(e, ContextCompactionSkipped)]
    return await turn.end("completed", skipped[-1].payload.detail if skipped else "not compacted")


async def _create(turn: TurnRunner, command: CommandInput) -> TurnEnded:
    creation = turn.creation
    if creation is None:
        binding = turn.held.state.binding
        mode = f"/{binding.context_mode}" if binding.context_mode else ""
        return await turn.end(
            "rejected",
            f"the session already exists ({binding.architecture}{mode}); fork it to change "
            "its architecture, or use /mode to change its context mode",
        )
    if creation.refusal is not None:
        return await turn.end("rejected", f"{creation.refusal}; created with the defaults")
    return await turn.end("completed", "created")


async def _mode(turn: TurnRunner, command: CommandInput) -> TurnEnded:
    state = turn.held.state
    decided = mode_change(state, command.payload.args, turn.deps.options.profiles)
    if isinstance(decided, Refusal):
        return await turn.end("rejected", decided.reason)
    turn.stage(turn.draft(SessionBindingChanged, decided))
    log.info("context_mode_changed", session_id=state.session_id, mode=decided.to_context_mode)
    return await turn.end("completed", f"mode {decided.to_context_mode}")


async def _fork(turn: TurnRunner, command: CommandInput) -> TurnEnded:
    state = turn.held.state
    child_id = turn.deps.new_id()
    decided = fork_binding(state, command.payload.args, turn.deps.options.profiles, child_id)
    if isinstance(decided, Refusal):
        return await turn.end("rejected", decided.reason)
    await turn.held.flush()  # the claim is durable before another log depends on it
    if not await _start_child(turn, decided, command.input_id):
        return await turn.end("rejected", f"session {decided.child_session_id} already exists")
    at = decided.created.forked_at_seq or 1
    forked = SessionForkedPayload(child_session_id=decided.child_session_id, at_seq=at)
    turn.stage(turn.draft(SessionForked, forked))
    log.info("session_forked", session_id=state.session_id, child=decided.child_session_id)
    return await turn.end("completed", f"forked {decided.child_session_id}")


async def _start_child(turn: TurnRunner, fork: Fork, input_id: str) -> bool:
    """The child's log starts with its `session/created` (an id derived from the command, so a
    retried fork recognises its own event); False if the child already exists."""
    draft = turn.draft
    event = SessionCreated.model_validate(
        {
            "id": "fk" + hashlib.sha256(input_id.encode()).hexdigest()[:30],
            "session_id": fork.child_session_id,
            "ts": draft.clock(),
            "agent_id": fork.created.agent_id,
            "causation_id": input_id,
            "payload": fork.created,
        }
    )
    try:
        await turn.held.start_other(event)
    except ConcurrencyConflict:
        return False
    return True


async def _reply(turn: TurnRunner, command: CommandInput) -> TurnEnded:
    """Another reply to the last user message: kept as a swipe, or replacing the reply."""
    name = command.payload.name
    if turn.held.state.binding.architecture != "st":
        return await turn.end(
            "rejected",
            f"/{name} is an st command; agent-tavern replies are not swiped (fork the session "
            "to st for SillyTavern semantics)",
        )
    problem = reply_target(st_chat(turn.held.events), name)
    if problem is not None:
        return await turn.end("rejected", problem)
    return await turn.reply_turn(SWIPE if name == SWIPE else REGENERATE)


async def _speak(turn: TurnRunner, command: CommandInput) -> TurnEnded:
    """`/speak NAME`: the named member of a group chat answers now."""
    choice = turn.choice
    if turn.held.state.binding.group is None or choice is None:
        return await turn.end("rejected", f"/speak: {NOT_A_GROUP}")
    if choice.refusal is not None:
        return await turn.end("rejected", choice.refusal)
    return await turn.group_replies([], choice.speakers)


async def _member(turn: TurnRunner, command: CommandInput) -> TurnEnded:
    decided = member_change(turn.held.state.binding, command.payload.args)
    if isinstance(decided, Refusal):
        return await turn.end("rejected", decided.reason)
    cls, payload = decided
    turn.stage(turn.draft(cls, payload, source="user"))
    return await turn.end("completed", f"member {command.payload.args.get('action')}")


async def _group(turn: TurnRunner, command: CommandInput) -> TurnEnded:
    decided = group_change(turn.held.state.binding, command.payload.args)
    if isinstance(decided, Refusal):
        return await turn.end("rejected", decided.reason)
    turn.stage(turn.draft(SessionBindingChanged, decided, source="user"))
    return await turn.end("completed", "group settings")


HANDLERS: dict[str, Handler] = {
    "speak": _speak,
    "member": _member,
    "group": _group,
    "compact": _compact,
    "create": _create,
    "mode": _mode,
    "fork": _fork,
    SWIPE: _reply,
    REGENERATE: _reply,
}
