"""A client of the running system: sends inputs (retrying with the same input id until the
stream acknowledges) and waits for the turn that claimed an input to end.

Turn boundaries arrive on a core subscription; a wait that hears nothing falls back to reading
the session log, so a message missed while NATS was away costs a poll, never a wrong answer.
A core subscriber hears an event as it is published, before the stream has stored it (a turn's
events go as one pipelined batch): whoever reads the log after a wait asks `stored` first.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime

from nats.aio.client import Client
from nats.aio.msg import Msg

from tavern_events import subjects
from tavern_events.envelope import InputCommand
from tavern_events.ids import new_id
from tavern_events.input import (
    CancelInput,
    CommandInput,
    CommandInputPayload,
    MessageInput,
    MessageInputPayload,
)
from tavern_events.union import encode
from tavern_runtime.sessionlog import SessionLogReader

POLL_FIRST_S = 2.0
POLL_MAX_S = 10.0
"""Log polls back off from the first to the longest pause: a missed core message is rare (NATS
restarts), and hundreds of waiters polling often would load the system under test."""
QUIET_POLL_S = 20.0
"""While the connection stayed up, the core subscription heard every turn boundary: a wait
reads the log only after this long without hearing its turn end (a slow subscriber may still
drop a message). Under a load of 200 sessions, polls every 2 s sent the server more session
log reads than the turns themselves cost it."""


@dataclass
class Sent:
    session_id: str
    input_id: str
    text: str
    kind: str = "message"
    sent_at: float = 0.0
    claimed_at: float | None = None
    """When a turn/start or step/start claiming it was seen (core subscription, may miss)."""
    ended_at: float | None = None
    outcome: str | None = None
    attempts: int = 0
    reconnects: int = 0
    """The connection's reconnects when it was sent: more later means a boundary may be missed."""

    @property
    def latency_s(self) -> float | None:
        return None if self.ended_at is None else self.ended_at - self.sent_at


@dataclass
class Driver:
    """Inputs out, turn ends in. `sent` keeps every input this driver published."""

    nc: Client
    sent: dict[str, list[Sent]] = field(default_factory=lambda: defaultdict(list))
    _claims: dict[tuple[str, int], list[str]] = field(default_factory=dict)
    _ended: dict[str, asyncio.Event] = field(default_factory=dict)
    _by_id: dict[str, Sent] = field(default_factory=dict)
    _subs: list[object] = field(default_factory=list)

    async def open(self) -> None:
        for name in ("turn.start", "step.start", "turn.end"):
            self._subs.append(await self.nc.subscribe(f"tavern.session.*.{name}", cb=self._on))

    async def close(self) -> None:
        for sub in self._subs:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()  # type: ignore[attr-defined]

    async def _on(self, msg: Msg) -> None:
        try:
            event = json.loads(msg.data)
            session_id, turn = event["session_id"], int(event["turn"])
        except (ValueError, KeyError, TypeError):
            return
        if event.get("type") in ("turn/start", "step/start"):
            claimed = [c["input_id"] for c in event.get("payload", {}).get("claimed", [])]
            self._claims.setdefault((session_id, turn), []).extend(claimed)
            for input_id in claimed:
                sent = self._by_id.get(input_id)
                if sent is not None and sent.claimed_at is None:
                    sent.claimed_at = time.monotonic()
        elif event.get("type") == "turn/end":
            outcome = event.get("payload", {}).get("outcome")
            for input_id in self._claims.pop((session_id, turn), []):
                self._resolve(input_id, outcome)

    def _resolve(self, input_id: str, outcome: str | None) -> None:
        sent = self._by_id.get(input_id)
        if sent is not None and sent.ended_at is None:
            sent.ended_at, sent.outcome = time.monotonic(), outcome
        event = self._ended.get(input_id)
        if event is not None:
            event.set()

    # --- sending ------------------------------------------------------------------------------

    async def say(self, session_id: str, text: str, *, deadline_s: float = 90.0) -> Sent:
        command = MessageInput(
            input_id=new_id(),
            session_id=session_id,
            ts=datetime.now(UTC),
            payload=MessageInputPayload(text=text),
        )
        return await self._publish(command, "message", text, deadline_s)

    async def command(
        self, session_id: str, name: str, args: dict[str, object] | None = None
    ) -> Sent:
        command = CommandInput(
            input_id=new_id(),
            session_id=session_id,
            ts=datetime.now(UTC),
            payload=CommandInputPayload(name=name, args=args or {}),
        )
        return await self._publish(command, "command", f"/{name}", 90.0)

    async def cancel(self, session_id: str) -> None:
        command = CancelInput(input_id=new_id(), session_id=session_id, ts=datetime.now(UTC))
        await self._publish(command, "cancel", "", 30.0, track=False)

    async def _publish(
        self, command: InputCommand, kind: str, text: str, deadline_s: float, *, track: bool = True
    ) -> Sent:
        """Publish until acknowledged: the input id is the Nats-Msg-Id, so a retry after an
        unknown outcome never submits twice."""
        sent = Sent(command.session_id, command.input_id, text, kind, time.monotonic())
        sent.reconnects = self.nc.stats["reconnects"]
        if track:
            self._by_id[sent.input_id] = sent
            self._ended[sent.input_id] = asyncio.Event()
            self.sent[command.session_id].append(sent)
        subject = subjects.session_input(command.session_id, kind)
        data = encode(command)
        give_up = time.monotonic() + deadline_s
        while True:
            sent.attempts += 1
            try:
                await self.nc.jetstream(timeout=3).publish(
                    subject, data, headers={"Nats-Msg-Id": command.input_id}
                )
                return sent
            except Exception:
                if time.monotonic() > give_up:
                    raise
                await asyncio.sleep(0.5)

    # --- waiting ------------------------------------------------------------------------------

    async def wait(self, sent: Sent, timeout: float = 60.0) -> bool:
        """Until the turn that claimed `sent` ended; False on timeout."""
        give_up = time.monotonic() + timeout
        event, pause = self._ended[sent.input_id], POLL_FIRST_S
        while sent.ended_at is None:
            left = give_up - time.monotonic()
            if left <= 0:
                return False
            slot = pause if self._may_have_missed(sent) else QUIET_POLL_S
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), min(slot, left))
            if sent.ended_at is None and self._may_have_missed(sent):
                with contextlib.suppress(Exception):
                    await self._poll(sent)
                pause = min(pause * 2, POLL_MAX_S)
        return True

    def _may_have_missed(self, sent: Sent) -> bool:
        reconnected = self.nc.stats["reconnects"] != sent.reconnects
        return reconnected or time.monotonic() - sent.sent_at >= QUIET_POLL_S

    async def _poll(self, sent: Sent) -> None:
        """Read the log: did a turn claim this input, and did that turn end?"""
        await self._ended_in_log(sent)

    async def stored(self, sent: Sent, timeout: float = 10.0) -> bool:
        """Until the session log holds the end of the turn that claimed `sent` (it was heard
        ending, or it ends meanwhile); False on timeout."""
        give_up = time.monotonic() + timeout
        while True:
            with contextlib.suppress(Exception):
                if await self._ended_in_log(sent):
                    return True
            if time.monotonic() > give_up:
                return False
            await asyncio.sleep(0.05)

    async def _ended_in_log(self, sent: Sent) -> bool:
        events = await SessionLogReader(self.nc.jetstream(timeout=5)).events(sent.session_id)
        turn = None
        for event in events:
            claimed = getattr(event.payload, "claimed", ())
            if any(c.input_id == sent.input_id for c in claimed):
                turn = event.turn
            if turn is not None and event.type == "turn/end" and event.turn == turn:
                self._resolve(sent.input_id, event.payload.outcome)
                return True
        return False

    async def settled(self, session_id: str, timeout: float = 10.0) -> bool:
        """Until the log holds the end of every turn heard ending in `session_id` (the
        last of them: turns end in log order)."""
        ended = [s for s in self.sent[session_id] if s.ended_at is not None]
        return not ended or await self.stored(ended[-1], timeout)

    def all_sent(self) -> list[Sent]:
        return [s for items in self.sent.values() for s in items]
