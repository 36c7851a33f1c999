"""Session binding rules (pure): what `create`, `mode` and `fork` commands may do.

A session is bound at creation to an architecture (`agent-tavern` or `st`) and, for
agent-tavern, a context mode. The mode may change only at an idle turn boundary; the
architecture never changes in place: a fork starts a new session that names its parent.
Each function returns the event payload to record, or a `Refusal` saying why not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tavern_events.envelope import Id
from tavern_events.group import GroupBinding
from tavern_events.reach import MemoryReach
from tavern_events.session import SessionBindingChangedPayload, SessionCreatedPayload
from tavern_loop.domain.state import SessionState
from tavern_loop.options import ProfileOptions

ST_HAS_NO_MODE = (
    "st sessions have no context mode; fork the session to agent-tavern to get one "
    "(tavern fork SESSION --architecture agent-tavern)"
)


@dataclass(frozen=True)
class Refusal:
    reason: str


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CreateArgs(_Args):
    architecture: Literal["agent-tavern", "st"] | None = None
    context_mode: Literal["dsh-native", "agent-managed"] | None = None
    character_id: Id | None = None
    persona_id: Id | None = None
    chat_id: Id | None = None
    title: str | None = Field(default=None, max_length=200)
    memory_reach: MemoryReach | None = None
    group: GroupBinding | None = None
    """A group chat: its members (the first is the character the chat is filed under)."""


class ModeArgs(_Args):
    context_mode: Literal["dsh-native", "agent-managed"]


class ForkArgs(_Args):
    session_id: Id | None = None
    """The child's id (a client picks it so it can follow the child at once)."""
    architecture: Literal["agent-tavern", "st"] | None = None
    context_mode: Literal["dsh-native", "agent-managed"] | None = None
    title: str | None = Field(default=None, max_length=200)


A = TypeVar("A", bound=_Args)


def parse_args(model: type[A], command: str, args: dict[str, Any]) -> A | Refusal:
    """The command's arguments, or a refusal naming the first bad one."""
    try:
        return model.model_validate(args)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "args"
        return Refusal(f"/{command}: {where}: {first['msg']}")


def managed_refusal(profiles: ProfileOptions, current: str | None) -> Refusal | None:
    """Agent-managed needs the projection seam and cooperating compaction; never faked."""
    missing = profiles.managed_missing()
    if not missing:
        return None
    stays = f"; the session stays in {current}" if current else ""
    return Refusal(f"agent-managed is unavailable ({'; '.join(missing)}){stays}")


def default_binding(session_id: str, profiles: ProfileOptions) -> SessionCreatedPayload:
    """What a session gets when its first input is not a `create`."""
    architecture = profiles.default_architecture
    mode = profiles.default_context_mode if architecture == "agent-tavern" else None
    return SessionCreatedPayload(architecture=architecture, context_mode=mode, chat_id=session_id)


def created_binding(
    session_id: str, args: dict[str, Any], profiles: ProfileOptions
) -> SessionCreatedPayload | Refusal:
    """The binding a `create` command asks for, filled in from the defaults."""
    parsed = parse_args(CreateArgs, "create", args)
    if isinstance(parsed, Refusal):
        return parsed
    architecture = parsed.architecture or profiles.default_architecture
    mode = _mode_for(architecture, parsed.context_mode, profiles.default_context_mode)
    if isinstance(mode, Refusal):
        return mode
    if mode == "agent-managed" and (refused := managed_refusal(profiles, None)):
        return refused
    return SessionCreatedPayload(
        architecture=architecture,
        context_mode=mode,
        chat_id=parsed.chat_id or session_id,
        character_id=parsed.character_id or _first_member(parsed.group),
        persona_id=parsed.persona_id,
        title=parsed.title,
        memory_reach=parsed.memory_reach or group_reach(parsed.group),
        group=parsed.group,
    )


def group_reach(group: GroupBinding | None) -> MemoryReach | None:
    """A group chat's own memory is its chat's (what is said there belongs to no one member);
    each member recalls its own memory beside it (`GroupBinding.reach`)."""
    return "chat" if group is not None else None


def _first_member(group: GroupBinding | None) -> str | None:
    return group.members[0].character_id if group is not None else None


def _mode_for(architecture: str, asked: str | None, default: str) -> str | Refusal | None:
    if architecture == "st":
        return Refusal(f"/create: {ST_HAS_NO_MODE}") if asked else None
    return asked or default


def mode_change(
    state: SessionState, args: dict[str, Any], profiles: ProfileOptions
) -> SessionBindingChangedPayload | Refusal:
    """Switch the context mode: only agent-tavern, only at an idle turn boundary."""
    parsed = parse_args(ModeArgs, "mode", args)
    if isinstance(parsed, Refusal):
        return parsed
    binding = state.binding
    if binding.architecture == "st":
        return Refusal(ST_HAS_NO_MODE)
    if state.open_turn is not None and state.open_turn.step > 0:
        return Refusal("the context mode changes only at an idle turn boundary")
    if parsed.context_mode == binding.context_mode:
        return Refusal(f"the session is already in {binding.context_mode}")
    if parsed.context_mode == "agent-managed" and (
        refused := managed_refusal(profiles, binding.context_mode)
    ):
        return refused
    return SessionBindingChangedPayload(
        from_architecture=binding.architecture,
        from_context_mode=binding.context_mode,
        to_architecture=binding.architecture,
        to_context_mode=parsed.context_mode,
        reason="mode command",
    )


@dataclass(frozen=True)
class Fork:
    child_session_id: str
    created: SessionCreatedPayload


def fork_binding(
    state: SessionState, args: dict[str, Any], profiles: ProfileOptions, new_child_id: str
) -> Fork | Refusal:
    """The child's binding: the parent's character and persona, a new chat, a back-link to
    the parent at its last seq before this command's turn."""
    parsed = parse_args(ForkArgs, "fork", args)
    if isinstance(parsed, Refusal):
        return parsed
    child = parsed.session_id or new_child_id
    if child == state.session_id:
        return Refusal("/fork: a session cannot be its own fork")
    parent = state.binding
    architecture = parsed.architecture or parent.architecture
    inherited = parent.context_mode if parent.architecture == "agent-tavern" else None
    mode = _mode_for(architecture, parsed.context_mode, inherited or profiles.default_context_mode)
    if isinstance(mode, Refusal):
        return Refusal(mode.reason.replace("/create", "/fork"))
    if mode == "agent-managed" and (refused := managed_refusal(profiles, None)):
        return refused
    return Fork(child, _child_created(state, child, architecture, mode, parsed.title))


def _child_created(
    state: SessionState, child: str, architecture: str, mode: str | None, title: str | None
) -> SessionCreatedPayload:
    parent = state.binding
    return SessionCreatedPayload(
        architecture=architecture,
        context_mode=mode,
        chat_id=child,
        character_id=parent.character_id,
        persona_id=parent.persona_id,
        parent_session_id=state.session_id,
        forked_at_seq=fork_point(state),
        agent_id=parent.agent_id,
        title=title,
        memory_reach=parent.memory_reach,
        owner=parent.owner,
        group=parent.group,
    )


def fork_point(state: SessionState) -> int:
    """The parent's last seq before the fork command's turn (its previous turn boundary)."""
    turn = state.open_turn
    return max(1, turn.start_seq - 1 if turn is not None else state.last_seq)
