"""The chat projection: a session log folded into a SillyTavern chat (header + message lines).

Rules (what becomes a line, exactly once, keyed by the session log seq in `extra.agentTavern`):
- `user/message` from the user (`source: user`) with non-blank text: a user line. Injected
  context (recall, reminders, plugin messages) is not chat.
- `assistant/message` without tool calls and with non-blank text: an assistant line with one
  swipe, as SillyTavern's saveReply writes it. Text written in the same step as a tool call is
  working output, not a reply.
- A cancelled turn's partial reply (`partial: true`) is kept like SillyTavern keeps a stopped
  generation: projected with the text that was streamed, marked `extra.agentTavern.partial`
  and `finishReason: "cancelled"`. A blank partial reply projects nothing.
- A redacted message keeps its line (the chat's shape stays) with `[redacted]` as text.
- A fork starts with a copy of the parent chat up to the fork point and names the parent chat
  in `chat_metadata.main_chat`, as a SillyTavern branch does.
- A new chat's greeting (`assistant/message` with form `greeting`) is its first line, as
  SillyTavern's getFirstMessage writes it: alternate greetings are its swipes.
- A chat imported from SillyTavern (`chat/imported`) takes the file's header (its names and
  `chat_metadata`); each imported line (`chat/line`, or a message whose payload keeps the line
  it came from) is written as the file held it, fields in their order, with the provenance mark
  added to its `extra`.
- A group chat is `group chats/<chat id>.jsonl` and, as SillyTavern's `/api/chats/group/save`
  writes it, holds the message lines only, joined by newlines; its header (`chat_metadata`)
  goes into the group's definition (`domain.groupdef`). Its group binding follows
  `session/binding-changed` and the `group/*` membership events.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, tzinfo
from typing import Any
from urllib.parse import quote

from tavern_events.chat import ChatImported, ChatLine
from tavern_events.envelope import SessionEvent
from tavern_events.group import (
    GroupBinding,
    MemberAdded,
    MemberMuted,
    MemberRemoved,
    MemberUnmuted,
    apply_member_event,
)
from tavern_events.message import AssistantMessage, UserMessage
from tavern_events.request import AgentRequest
from tavern_events.session import SessionBindingChanged
from tavern_projector.domain import stformat, swipes
from tavern_projector.domain.groupdef import GROUP_CHATS

REDACTED = "[redacted]"
GREETING = "greeting"
PROVENANCE = "agentTavern"
URI_SAFE = "-_.!~*'()"
"""What JavaScript's encodeURIComponent leaves as it is."""


@dataclass(frozen=True)
class ChatBinding:
    """Who speaks in a chat and which session writes it."""

    session_id: str
    chat_id: str
    character: str
    user_name: str
    architecture: str = "agent-tavern"
    context_mode: str | None = "dsh-native"
    parent_session_id: str | None = None
    forked_at_seq: int | None = None
    folder: str | None = None
    """The card's file stem (SillyTavern's chats folder for it); else the character's name."""
    group: GroupBinding | None = None
    """A group chat's members and settings as they stand (None: one character)."""
    group_file: str | None = None
    """The id of its group's definition for the session's owner (`groupdef.file_id`)."""

    @property
    def directory(self) -> str:
        if self.group is not None:
            return GROUP_CHATS
        return self.folder or stformat.safe_name(self.character)

    @property
    def key(self) -> str:
        """`<card file stem>/<chat id>`: the chat's path under the chats directory, minus
        `.jsonl`; a group chat's is `group chats/<chat id>`, beside the chats directory."""
        return f"{self.directory}/{self.chat_id}"


@dataclass
class ChatState:
    """One chat in memory. `apply` appends to `messages` in place and returns the state.

    Each message's JSON line is kept beside it, so rewriting a long chat costs a join, not
    a serialisation of every message."""

    binding: ChatBinding
    header: dict[str, Any]
    messages: list[dict[str, Any]]
    last_seq: int = 0
    gen_started: datetime | None = None
    redacted: set[int] = field(default_factory=set)
    encoded: list[str] = field(default_factory=list)
    moved_from: str | None = None
    """The key the chat was written under before an import renamed it (to remove)."""

    def __post_init__(self) -> None:
        if len(self.encoded) != len(self.messages):
            self.encoded = [stformat.dumps(m) for m in self.messages]

    def append(self, message: dict[str, Any]) -> None:
        self.messages.append(message)
        self.encoded.append(stformat.dumps(message))

    def render(self) -> bytes:
        if self.binding.group is not None:  # lines only, no trailing newline, as SillyTavern
            return "\n".join(self.encoded).encode()
        return ("\n".join([stformat.dumps(self.header), *self.encoded]) + "\n").encode()


def header(binding: ChatBinding, created: datetime, tz: tzinfo) -> dict[str, Any]:
    """The first line, as SillyTavern's saveChat writes it (real names, not `unused`)."""
    metadata: dict[str, Any] = {PROVENANCE: {"sessionId": binding.session_id}}
    if binding.parent_session_id is not None:
        metadata["main_chat"] = binding.parent_session_id
    return {
        "user_name": binding.user_name,
        "character_name": binding.character,
        "create_date": stformat.create_date(created, tz),
        "chat_metadata": metadata,
    }


def new_chat(
    binding: ChatBinding, created: datetime, tz: tzinfo, copied: Iterable[dict[str, Any]] = ()
) -> ChatState:
    """An empty chat (a fork starts with the parent's lines up to the fork point)."""
    return ChatState(binding, header(binding, created, tz), list(copied))


def read_file(binding: ChatBinding, data: bytes, head: dict[str, Any] | None) -> ChatState:
    """A chat read back from its file; a group chat's header is `head` (kept beside it), and
    a header line found in its file (another SillyTavern's) is not a message."""
    if binding.group is None:
        return from_file(binding, *stformat.parse(data))
    lines = stformat.parse_lines(data)
    if lines and "mes" not in lines[0] and "name" not in lines[0]:
        lines = lines[1:]
    return from_file(binding, head or {}, lines)


def from_file(
    binding: ChatBinding, head: dict[str, Any], messages: list[dict[str, Any]]
) -> ChatState:
    """A chat read back from its file: the last projected seq is the highest own `eventSeq`."""
    own = [seq for m in messages if (seq := _own_seq(m, binding.session_id)) is not None]
    return ChatState(binding, head, messages, max(own, default=0))


def fork_lines(parent: ChatState, at_seq: int) -> list[dict[str, Any]]:
    """The parent's lines up to its log position `at_seq` (older ancestors' lines included)."""
    kept = []
    for message in parent.messages:
        seq = _own_seq(message, parent.binding.session_id)
        if seq is not None and seq > at_seq:
            break
        kept.append(message)
    return kept


def apply(state: ChatState, event: SessionEvent, tz: tzinfo) -> ChatState:
    """Fold one session event into the chat; events at or below `last_seq` change nothing."""
    if event.seq <= state.last_seq:
        return state
    if isinstance(event, AgentRequest):
        state.gen_started = event.ts
    elif isinstance(event, SessionBindingChanged):
        state.binding = _rebound(state.binding, event)
    elif isinstance(event, MemberAdded | MemberRemoved | MemberMuted | MemberUnmuted):
        if state.binding.group is not None:
            group = apply_member_event(state.binding.group, event)
            state.binding = replace(state.binding, group=group)
    elif isinstance(event, ChatImported):
        _imported_header(state, event)
    elif isinstance(event, ChatLine):
        _append(state, event, imported_line(state, event, event.payload.line))
    elif isinstance(event, UserMessage):
        line = event.payload.imported
        _append(
            state,
            event,
            user_line(state, event, tz) if line is None else imported_line(state, event, line),
        )
    elif isinstance(event, AssistantMessage):
        _reply(state, event, tz)
    return state


def _reply(state: ChatState, event: AssistantMessage, tz: tzinfo) -> None:
    if event.payload.imported is not None:
        _append(state, event, imported_line(state, event, event.payload.imported))
    elif event.form == GREETING:
        _append(state, event, greeting_line(state, event, tz))
    elif not _swipe(state, event, tz):
        _append(state, event, assistant_line(state, event, tz))
    state.gen_started = None


def _swipe(state: ChatState, event: AssistantMessage, tz: tzinfo) -> bool:
    """Fold a swipe or regeneration into the last reply line; False if it is not one."""
    if event.form not in swipes.FORMS:
        return False
    index = swipes.last_reply(state.messages)
    line = assistant_line(state, event, tz)
    if index is None or line is None:
        return False
    state.messages[index] = swipes.folded(state.messages[index], line, event.form)
    state.encoded[index] = stformat.dumps(state.messages[index])
    state.last_seq = event.seq
    return True


def _imported_header(state: ChatState, event: ChatImported) -> None:
    """The file's own header (names, `chat_metadata`), marked as this session's chat."""
    head = dict(event.payload.header)
    metadata = head.get("chat_metadata")
    metadata = dict(metadata) if isinstance(metadata, dict) else {}
    metadata[PROVENANCE] = {"sessionId": state.binding.session_id}
    head["chat_metadata"] = metadata
    state.header = head
    character, user = head.get("character_name"), head.get("user_name")
    before = state.binding.key
    state.binding = replace(
        state.binding,
        character=character
        if isinstance(character, str) and character
        else state.binding.character,
        user_name=user if isinstance(user, str) and user else state.binding.user_name,
    )
    if state.binding.key != before and state.moved_from is None:
        state.moved_from = before


def greeting_line(state: ChatState, event: AssistantMessage, tz: tzinfo) -> dict[str, Any] | None:
    """A new chat's greeting as SillyTavern's getFirstMessage writes it (alternate greetings
    as its swipes), or None when it has no text."""
    if chat_text(event) is None:
        return None
    payload = event.payload
    mark = provenance(state.binding, event)
    line: dict[str, Any] = {
        "name": speaker_name(state, event),
        "is_user": False,
        "is_system": False,
        "send_date": stformat.send_date(event.ts, tz),
        "mes": _redacted(state, event, mark, payload.content),
        "extra": {PROVENANCE: mark},
    }
    line |= avatar_fields(event)
    if payload.swipes:
        alternates = list(payload.swipes)
        line |= {"swipe_id": 0, "swipes": alternates, "swipe_info": []}
        if mark.get("redacted"):
            line["swipes"] = [REDACTED for _ in alternates]
    return line


def imported_line(state: ChatState, event: SessionEvent, line: dict[str, Any]) -> dict[str, Any]:
    """An imported line as the file held it, its `extra` carrying the provenance mark."""
    copied = copy.deepcopy(line) if event.seq in state.redacted else dict(line)
    extra = copied.get("extra")
    mark = provenance(state.binding, event)
    copied["extra"] = {**(extra if isinstance(extra, dict) else {}), PROVENANCE: mark}
    if event.seq in state.redacted:
        _blank(copied)
    return copied


def _append(state: ChatState, event: SessionEvent, line: dict[str, Any] | None) -> None:
    if line is not None:
        state.append(line)
        state.last_seq = event.seq


def _rebound(binding: ChatBinding, event: SessionBindingChanged) -> ChatBinding:
    target = event.payload
    return replace(
        binding,
        architecture=target.to_architecture,
        context_mode=target.to_context_mode,
        group=target.group if target.group is not None else binding.group,
    )


def provenance(binding: ChatBinding, event: SessionEvent) -> dict[str, Any]:
    """`extra.agentTavern`: which session, log seq and event a line comes from."""
    found: dict[str, Any] = {"architecture": binding.architecture}
    if binding.context_mode is not None:
        found["contextMode"] = binding.context_mode
    found |= {
        "sessionId": binding.session_id,
        "eventSeq": event.seq,
        "messageId": event.id,
        "turn": event.turn,
        "step": event.step,
    }
    return found


def chat_text(event: SessionEvent) -> tuple[bool, str] | None:
    """`(is_user, text)` when the event becomes a chat line (the rules above), else None."""
    if isinstance(event, UserMessage):
        text = event.payload.text
        return (True, text) if event.source == "user" and text.strip() else None
    if isinstance(event, AssistantMessage):
        p = event.payload
        return (False, p.content) if not p.tool_calls and p.content.strip() else None
    return None


def user_line(state: ChatState, event: UserMessage, tz: tzinfo) -> dict[str, Any] | None:
    """A line as SillyTavern's sendMessageAsUser writes it, or None if not chat."""
    if chat_text(event) is None:
        return None
    mark = provenance(state.binding, event)
    mes = _redacted(state, event, mark, event.payload.text)
    return {
        "name": event.payload.name or state.binding.user_name,
        "is_user": True,
        "is_system": False,
        "send_date": stformat.send_date(event.ts, tz),
        "mes": mes,
        "extra": {"isSmallSys": False, PROVENANCE: mark},
    }


def assistant_line(state: ChatState, event: AssistantMessage, tz: tzinfo) -> dict[str, Any] | None:
    """A line as SillyTavern's saveReply writes a new reply (one swipe), or None."""
    payload = event.payload
    if chat_text(event) is None:
        return None
    mark = provenance(state.binding, event)
    if payload.partial:
        mark |= {"partial": True, "finishReason": payload.finish_reason}
    mes = _redacted(state, event, mark, payload.content)
    reasoning = None if mark.get("redacted") else payload.reasoning_content
    started = stformat.js_iso(state.gen_started or event.ts)
    finished = stformat.js_iso(event.ts)
    sent = stformat.send_date(event.ts, tz)
    extra = _reply_extra(payload.provider, payload.model, reasoning, mark)
    swipe_extra = _reply_extra(payload.provider, payload.model, reasoning, dict(mark))
    swipe = {"send_date": sent, "gen_started": started, "gen_finished": finished}
    return {
        "extra": extra,
        "name": speaker_name(state, event),
        "is_user": False,
        "send_date": sent,
        "mes": mes,
        **avatar_fields(event),
        "gen_started": started,
        "gen_finished": finished,
        "swipe_info": [{**swipe, "extra": swipe_extra}],
        "swipe_id": 0,
        "swipes": [mes],
    }


def speaker_name(state: ChatState, event: AssistantMessage) -> str:
    """Who the line is from: a group chat's speaking member, else the chat's character."""
    speaker = event.payload.speaker
    return speaker.name if speaker is not None else state.binding.character


def avatar_fields(event: AssistantMessage) -> dict[str, Any]:
    """A group chat line's speaker card, as SillyTavern writes it (`original_avatar`, the
    card file; `force_avatar`, its thumbnail URL)."""
    speaker = event.payload.speaker
    if speaker is None or speaker.avatar is None:
        return {}
    return {
        "original_avatar": speaker.avatar,
        "force_avatar": "/thumbnail?type=avatar&file=" + quote(speaker.avatar, safe=URI_SAFE),
    }


def _reply_extra(
    provider: str | None, model: str | None, reasoning: str | None, mark: dict[str, Any]
) -> dict[str, Any]:
    extra: dict[str, Any] = {"api": provider or "", "model": model or ""}
    if reasoning:
        extra["reasoning"] = reasoning
    extra[PROVENANCE] = mark
    return extra


def _redacted(state: ChatState, event: SessionEvent, mark: dict[str, Any], text: str) -> str:
    if event.seq not in state.redacted:
        return text
    mark["redacted"] = True
    return REDACTED


def redact(state: ChatState, seq: int) -> bool:
    """Blank the line projected from this session's log seq; False if there is none."""
    state.redacted.add(seq)
    for index, message in enumerate(state.messages):
        if seq in line_seqs(message, state.binding.session_id):
            _blank(message)
            state.encoded[index] = stformat.dumps(message)
            return True
    return False


def _blank(message: dict[str, Any]) -> None:
    message["mes"] = REDACTED
    if "swipes" in message:
        message["swipes"] = [REDACTED for _ in message["swipes"]]
    for extra in _extras(message):
        extra.pop("reasoning", None)
        mark = extra.get(PROVENANCE)
        if isinstance(mark, dict):
            mark["redacted"] = True


def _extras(message: dict[str, Any]) -> list[dict[str, Any]]:
    found = [message.get("extra")]
    found += [info.get("extra") for info in message.get("swipe_info", []) if isinstance(info, dict)]
    return [extra for extra in found if isinstance(extra, dict)]


def line_seqs(message: dict[str, Any], session_id: str) -> set[int]:
    """Every log seq of this session a line holds text from (each swipe's too)."""
    found = {_mark_seq(extra, session_id) for extra in _extras(message)}
    return {seq for seq in found if seq is not None}


def _own_seq(message: dict[str, Any], session_id: str) -> int | None:
    return _mark_seq(message.get("extra") or {}, session_id)


def _mark_seq(extra: dict[str, Any], session_id: str) -> int | None:
    mark = extra.get(PROVENANCE)
    if not isinstance(mark, dict) or mark.get("sessionId") != session_id:
        return None
    seq = mark.get("eventSeq")
    return seq if isinstance(seq, int) else None
