"""A live conversation with one session: publish inputs, render the session's events as they land.

Shared by `tavern chat` (interactive) and the demo that `tavern up` plays.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TextIO

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js.api import DeliverPolicy

from tavern_events import subjects
from tavern_events.envelope import InputCommand, SessionEvent
from tavern_events.ids import new_id
from tavern_events.input import (
    CancelInput,
    CommandInput,
    CommandInputPayload,
    MessageInput,
    MessageInputPayload,
)
from tavern_events.streams import SESSIONS
from tavern_events.union import decode_or_skip, encode
from tavern_runtime import tracing
from tavern_runtime.errors import ConfigurationError

DIM, BOLD, CYAN, YELLOW, RED, RESET = (
    "\x1b[2m",
    "\x1b[1m",
    "\x1b[36m",
    "\x1b[33m",
    "\x1b[31m",
    "\x1b[0m",
)
PREVIEW = 160


def _preview(text: str, limit: int = PREVIEW) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def readable(content: str, limit: int = PREVIEW) -> str:
    """A tool's output as a person reads it: a JSON object as `key: value` pairs (lists
    counted, long texts cut at a word), anything else as flat text."""
    try:
        value = json.loads(content)
    except ValueError:
        return _preview(content, limit)
    if isinstance(value, dict):
        parts = [f"{key}: {_brief(item)}" for key, item in value.items()]
        return _preview("; ".join(parts) if parts else "(nothing)", limit)
    return _preview(_brief(value, limit), limit)


def _brief(value: Any, limit: int = 60) -> str:
    if isinstance(value, str):
        return _preview(value, limit)
    if isinstance(value, list):
        if not value:
            return "none"
        if all(isinstance(v, str | int | float) for v in value):
            return _preview(", ".join(str(v) for v in value), limit)
        first = value[0]
        if isinstance(first, dict):
            text = next((v for v in first.values() if isinstance(v, str) and " " in v), None)
            head = f": {_preview(text, 40)!r}" if text else ""
            return f"{len(value)} item{'s' if len(value) != 1 else ''}{head}"
        return f"{len(value)} items"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_brief(v, 20)}" for k, v in list(value.items())[:4]) + "}"
    if value is None:
        return "-"
    return json.dumps(value)


def _arguments(text: str) -> str:
    """`key="value", n=3` from a tool call's JSON arguments."""
    try:
        value = json.loads(text)
    except ValueError:
        return _preview(text, 120)
    if not isinstance(value, dict):
        return _preview(text, 120)
    pairs = (f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in value.items())
    return _preview(", ".join(pairs), 120)


class Renderer:
    """Turns session events into terminal lines; assistant text is printed as it streams.

    With a `prompt` (an interactive chat) the prompt is shown whenever the session waits for
    the user, and what the user typed is not printed a second time."""

    def __init__(
        self,
        out: TextIO = sys.stdout,
        colour: bool | None = None,
        prefix: str = "",
        prompt: str = "",
    ) -> None:
        self.out = out
        self.colour = out.isatty() if colour is None else colour
        self.prefix = prefix
        self.prompt = prompt
        self.own_inputs: set[str] = set()
        """Inputs typed here: their `user/message` is already on the screen."""
        self._streaming = False
        self._prompted = False
        self._names: dict[str, str] = {}

    def _c(self, code: str, text: str) -> str:
        return f"{code}{text}{RESET}" if self.colour else text

    def show_prompt(self) -> None:
        if self.prompt and not self._prompted:
            self._end_stream()
            self.out.write(self._c(CYAN, self.prompt))
            self.out.flush()
            self._prompted = True

    def prompt_answered(self) -> None:
        """The user pressed Enter: the cursor is on a fresh line."""
        self._prompted = False

    def _clear_prompt(self) -> None:
        if self._prompted:
            self.out.write("\r\x1b[K" if self.out.isatty() else "\n")
            self._prompted = False

    def _line(self, text: str) -> None:
        self._end_stream()
        self._clear_prompt()
        self.out.write(f"{self.prefix}{text}\n")
        self.out.flush()

    def _end_stream(self) -> None:
        if self._streaming:
            self.out.write("\n")
            self._streaming = False

    def render(self, event: SessionEvent) -> None:
        handler = getattr(self, "_" + event.type.replace("/", "_").replace("-", "_"), None)
        if handler is not None:
            handler(event)

    def _speaker(self, event: Any) -> str:
        """Who is speaking: a group chat's member by name (its id until its first reply)."""
        speaker = getattr(event.payload, "speaker", None)
        if speaker is not None:
            self._names[speaker.character_id] = speaker.name
            return str(speaker.name)
        if event.actor_id is None:
            return "assistant"
        return str(self._names.get(event.actor_id, event.actor_id))

    def _assistant_chunk(self, event: Any) -> None:
        delta = event.payload.delta
        if not delta:
            return
        if not self._streaming:
            self._clear_prompt()
            self.out.write(f"{self.prefix}{self._c(BOLD, self._speaker(event))}: ")
            self._streaming = True
        self.out.write(delta)
        self.out.flush()

    def _assistant_message(self, event: Any) -> None:
        if self._streaming:
            self._end_stream()
        elif event.payload.content:
            self._line(f"{self._c(BOLD, self._speaker(event))}: {event.payload.content}")
        if event.payload.partial:
            why = "the stream broke" if event.payload.finish_reason == "error" else "cancelled"
            self._line(self._c(DIM, f"  (partial reply kept: {why})"))
        elif event.payload.finish_reason == "length":
            self._line(self._c(DIM, "  (the reply was cut at the token limit)"))

    def _user_message(self, event: Any) -> None:
        text = event.payload.text
        if self.prompt and event.payload.input_id in self.own_inputs:
            return
        if event.form == "recall":
            self._line(self._c(DIM, f"  recall ▸ {_preview(text, 300)}"))
        elif event.source.startswith("plugin:"):
            self._line(self._c(DIM, f"  {event.source} ▸ {_preview(text)}"))
        else:
            self._line(f"{self._c(CYAN, 'you')}: {text}")

    def _agent_request(self, event: Any) -> None:
        p = event.payload
        label = "offline stand-in model" if p.offline else f"{p.provider}:{p.model}"
        self._line(
            self._c(
                DIM, f"  … asking {label} ({p.message_count} messages, ~{p.token_estimate} tokens)"
            )
        )

    def _agent_retry(self, event: Any) -> None:
        p = event.payload
        failed = f"{p.provider}:{p.model} failed ({p.reason}{_status(p)})"
        if p.fallback is not None:
            target = p.fallback
            label = (
                "the offline stand-in model"
                if target.offline
                else f"{target.provider}:{target.model}"
            )
            then = f"falling back to {label}"
        else:
            then = f"retrying in {p.delay_s or 0:g} s"
        self._line(self._c(YELLOW, f"  ↻ {failed}; {then}"))

    def _tool_call(self, event: Any) -> None:
        p = event.payload
        self._line(self._c(YELLOW, f"  → {p.name}({_arguments(p.arguments)})"))

    def _tool_result(self, event: Any) -> None:
        p = event.payload
        mark = "←" if p.ok else "✗"
        shown = readable(p.content) if p.ok else _preview(p.content)
        more = " (output cut)" if p.truncated else ""
        self._line(self._c(YELLOW if p.ok else RED, f"  {mark} {p.name}: {shown}{more}"))

    def _context_compacted(self, event: Any) -> None:
        p = event.payload
        self._line(
            self._c(
                DIM,
                f"  context compacted ({p.strategy}): {p.tokens_before} → {p.tokens_after} tokens",
            )
        )

    def _context_compaction_skipped(self, event: Any) -> None:
        self._line(self._c(DIM, f"  {event.payload.detail}"))

    def _session_binding_changed(self, event: Any) -> None:
        p = event.payload
        change = f"{p.from_context_mode} → {p.to_context_mode}"
        self._line(self._c(DIM, f"  context mode {change} (from the next turn)"))

    def _turn_end(self, event: Any) -> None:
        p = event.payload
        if p.outcome != "completed":
            why = f": {p.error.message}" if p.error else (f" ({p.reason})" if p.reason else "")
            self._line(self._c(RED, f"  turn {event.turn} {p.outcome}{why}"))
        self.show_prompt()


def _status(payload: Any) -> str:
    parts = [f"HTTP {payload.status}" if payload.status else "", payload.provider_code or ""]
    shown = ", ".join(p for p in parts if p)
    return f", {shown}" if shown else ""


NO_LOG_READS = (
    "this NATS login may not read session logs (the `client` login reads none): run the CLI "
    "as the operator, or follow the session in the web app"
)
"""What a refused (hence unanswered) read of SESSIONS means to the person at the terminal."""


class Conversation:
    """Inputs out, events in. `turn_ended` fires for every turn/end of the session."""

    def __init__(self, nc: Client, session_id: str, renderer: Renderer) -> None:
        self.nc, self.session_id, self.renderer = nc, subjects.validate_id(session_id), renderer
        self.js = nc.jetstream()
        self.turn_ended = asyncio.Queue[SessionEvent]()
        self._sub: Any = None

    async def open(self) -> None:
        """Follow the session's log from now on (an ordered consumer: nothing is missed).
        A NATS login that may not read session logs (`client`) is told so."""
        try:
            self._sub = await self.js.subscribe(
                subjects.session_filter(self.session_id),
                stream=SESSIONS.name,  # named: no stream lookup
                ordered_consumer=True,
                deliver_policy=DeliverPolicy.NEW,
                cb=self._on_event,
            )
        except NatsTimeoutError:
            raise ConfigurationError(NO_LOG_READS) from None

    async def exists(self) -> bool:
        """Whether the session has a log (any event in SESSIONS)."""
        try:
            info = await self.js.stream_info(
                SESSIONS.name, subjects_filter=subjects.session_filter(self.session_id)
            )
        except NatsTimeoutError:
            raise ConfigurationError(NO_LOG_READS) from None
        return bool(info.state.subjects)

    async def close(self) -> None:
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()

    async def _on_event(self, msg: Msg) -> None:
        result = decode_or_skip(msg.data, None, SessionEvent)
        event = getattr(result, "event", None)
        if not isinstance(event, SessionEvent):
            return
        self.renderer.render(event)
        if event.type == "turn/end":
            self.turn_ended.put_nowait(event)

    async def send(self, text: str) -> str:
        command = MessageInput(
            input_id=new_id(),
            session_id=self.session_id,
            ts=_now(),
            payload=MessageInputPayload(text=text),
        )
        self.renderer.own_inputs.add(command.input_id)
        await self._publish(command, "message")
        return command.input_id

    async def cancel(self) -> None:
        await self._publish(
            CancelInput(input_id=new_id(), session_id=self.session_id, ts=_now()), "cancel"
        )

    async def command(self, name: str, args: dict[str, Any] | None = None) -> str:
        command = CommandInput(
            input_id=new_id(),
            session_id=self.session_id,
            ts=_now(),
            payload=CommandInputPayload(name=name, args=args or {}),
        )
        await self._publish(command, "command")
        return command.input_id

    async def _publish(self, command: InputCommand, kind: str) -> None:
        subject = subjects.session_input(self.session_id, kind)
        attributes = {"tavern.session_id": self.session_id, "tavern.input_id": command.input_id}
        with tracing.span("cli.input", kind="producer", attributes=attributes):
            headers = tracing.inject({"Nats-Msg-Id": command.input_id})
            await self.js.publish(subject, encode(command), headers=headers, timeout=5)

    async def wait_turn(self, timeout: float = 60.0) -> SessionEvent:
        return await asyncio.wait_for(self.turn_ended.get(), timeout)


def _now() -> datetime:
    return datetime.now(UTC)


Say = Callable[[str], None]
