"""The gateway on the bus: RPCs and inputs signed as the signed-in user, a session's owner, and
a session's log as a stream of stored messages (for server-sent events)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from nats.aio.client import Client
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig, DeliverPolicy

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
from tavern_events.streams import SESSIONS
from tavern_events.union import encode
from tavern_runtime import tracing
from tavern_runtime.auth import Credentials
from tavern_runtime.errors import PermanentError, TavernError, TransientError
from tavern_runtime.principals import Principal
from tavern_runtime.sessionlog import SessionLogReader

HEARTBEAT_S = 15.0


class Refused(PermanentError):
    """A service refused the request: its error, as the common model gave it."""

    def __init__(self, code: str, message: str, reason: str | None = None, **details: Any) -> None:
        super().__init__(message, **details)
        self.code = code
        self.reason = reason


class Unavailable(TransientError):
    code = "unavailable"


@dataclass
class Stored:
    """One message of a session's log as stored: its stream seq (the SSE event id) and body."""

    seq: int
    data: bytes


class Bus:
    def __init__(self, nc: Client, credentials: Credentials, rpc_timeout_s: float) -> None:
        self.nc, self.credentials, self.timeout = nc, credentials, rpc_timeout_s
        self.js: JetStreamContext = nc.jetstream(timeout=10)
        self.reader = SessionLogReader(self.js)

    async def rpc(
        self, principal: Principal, service: str, operation: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        """The reply of `tavern.rpc.<service>.<operation>` asked as `principal`; `Refused`
        with the service's error, `Unavailable` when no one answers in time."""
        subject = subjects.rpc(service, operation)
        try:
            msg = await self.nc.request(
                subject,
                json.dumps(body).encode(),
                timeout=self.timeout,
                headers=self.credentials.headers(principal),
            )
        except (TimeoutError, NatsTimeout, NoRespondersError):
            raise Unavailable(f"the {service} service did not answer; try again") from None
        try:
            reply = json.loads(msg.data or b"{}")
        except ValueError:
            raise Unavailable(f"the {service} service answered something unreadable") from None
        error = reply.get("error") if isinstance(reply, dict) else None
        if isinstance(error, dict):
            details = {
                k: v
                for k, v in error.items()
                if k not in ("code", "message", "retryable", "reason")
                and isinstance(v, str | int | float | bool)
            }
            raise Refused(
                str(error.get("code", "internal")),
                str(error.get("message", "refused")),
                reason=error.get("reason") if isinstance(error.get("reason"), str) else None,
                **details,
            )
        return reply if isinstance(reply, dict) else {"result": reply}

    # --- inputs ---------------------------------------------------------------------------------

    async def send_message(self, principal: Principal, session_id: str, text: str) -> str:
        command = MessageInput(
            input_id=new_id(),
            session_id=session_id,
            ts=_now(),
            payload=MessageInputPayload(text=text),
        )
        return await self._publish(principal, command, "message")

    async def send_command(
        self, principal: Principal, session_id: str, name: str, args: dict[str, Any]
    ) -> str:
        command = CommandInput(
            input_id=new_id(),
            session_id=session_id,
            ts=_now(),
            payload=CommandInputPayload(name=name, args=args),
        )
        return await self._publish(principal, command, "command")

    async def cancel(self, principal: Principal, session_id: str) -> str:
        command = CancelInput(input_id=new_id(), session_id=session_id, ts=_now())
        return await self._publish(principal, command, "cancel")

    async def _publish(self, principal: Principal, command: InputCommand, kind: str) -> str:
        subject = subjects.session_input(command.session_id, kind)
        headers = self.credentials.headers(principal, **{"Nats-Msg-Id": command.input_id})
        with tracing.span("gateway.input", kind="producer", attributes=_input_attrs(command)):
            try:
                await self.js.publish(
                    subject, encode(command), headers=tracing.inject(headers), timeout=5
                )
            except (TimeoutError, NatsTimeout, NoRespondersError):
                raise Unavailable("the input could not be stored; try again") from None
        return command.input_id

    # --- the session log ------------------------------------------------------------------------

    async def binding_of(self, session_id: str) -> Any | None:
        """The payload of the session's `session/created` (None while it has none)."""
        try:
            created = await self.reader.last(session_id, "session/created")
        except TavernError:
            return None
        return getattr(created, "payload", None)

    async def owner_of(self, session_id: str) -> str | None:
        """The owner its `session/created` names; None while the session has none."""
        try:
            created = await self.reader.last(session_id, "session/created")
        except TavernError:
            return None
        return getattr(getattr(created, "payload", None), "owner", None)

    async def follow(self, session_id: str, after_seq: int = 0) -> AsyncIterator[Stored | None]:
        """The session's stored messages after stream seq `after_seq`, then live ones as they
        are stored (an ordered consumer: none missed, none twice); None as a heartbeat when
        nothing came for a while."""
        start: dict[str, Any] = (
            {
                "deliver_policy": DeliverPolicy.BY_START_SEQUENCE,
                "config": ConsumerConfig(opt_start_seq=after_seq + 1),
            }
            if after_seq > 0
            else {"deliver_policy": DeliverPolicy.ALL}
        )
        sub = await self.js.subscribe(
            subjects.session_filter(session_id),
            stream=SESSIONS.name,
            ordered_consumer=True,
            pending_msgs_limit=-1,
            **start,
        )
        try:
            while True:
                try:
                    msg = await sub.next_msg(timeout=HEARTBEAT_S)
                except NatsTimeout:
                    yield None
                    continue
                seq = msg.metadata.sequence.stream
                if seq > after_seq:
                    yield Stored(seq, msg.data)
        finally:
            with contextlib.suppress(Exception):  # the connection may be gone already
                await sub.unsubscribe()


SERVICES = ("loop", "ledger", "consolidator", "projector", "gateway")


async def operator_status(nc: Client, js: JetStreamContext) -> dict[str, Any]:
    """Services (ping), streams, consumers with their lag, dead letters: read-only."""
    from tavern_events import streams as contract

    async def ping(name: str) -> dict[str, Any]:
        try:
            reply = await nc.request(subjects.rpc(name, "ping"), b"", timeout=2)
            body = json.loads(reply.data)
            return {"name": name, "ok": bool(body.get("ok")), "version": body.get("version")}
        except Exception as exc:  # no responder, timeout: a red row
            return {"name": name, "ok": False, "version": None, "error": type(exc).__name__}

    services = await asyncio.gather(*(ping(n) for n in SERVICES))
    found_streams, consumers = [], []
    for spec in contract.ALL:
        try:
            info = await js.stream_info(spec.name)
            infos = await js.consumers_info(spec.name)
        except Exception:  # missing or not allowed: shown as such
            found_streams.append({"name": spec.name, "ok": False})
            continue
        found_streams.append(
            {
                "name": spec.name,
                "ok": True,
                "messages": info.state.messages,
                "bytes": info.state.bytes,
            }
        )
        for c in infos:
            consumers.append(
                {
                    "stream": spec.name,
                    "name": c.name,
                    "pending": c.num_pending or 0,
                    "ack_pending": c.num_ack_pending or 0,
                    "redelivered": c.num_redelivered or 0,
                }
            )
    dead = next((s.get("messages", 0) for s in found_streams if s["name"] == "DLQ"), 0)
    return {
        "services": list(services),
        "streams": found_streams,
        "consumers": consumers,
        "dead_letters": dead,
    }


def _now() -> datetime:
    return datetime.now(UTC)


def _input_attrs(command: InputCommand) -> dict[str, str]:
    return {"tavern.session_id": command.session_id, "tavern.input_id": command.input_id}
