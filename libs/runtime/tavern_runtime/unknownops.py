"""Requests for an operation a service does not have get a `not_found` error, not silence:
without it a caller could not tell a wrong name from a service that is down (both would be
"no responders").

One plain subscription on `tavern.rpc.<service>.>` in its own queue group sees each request of
the service once; a subject a handler serves passes without a reply. It runs on a connection of
its own: nats-server's `allow_responses` lets a client answer a request delivered to it once
only, and a second delivery to the same connection would cost the real handler its reply.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from nats.aio.msg import Msg

from tavern_events.replies import error_reply
from tavern_runtime.bus import NatsConnection, connect, rpc_limits
from tavern_runtime.logs import get_logger
from tavern_runtime.rpcguard import RPC_PREFIX
from tavern_runtime.settings import TavernSettings

log = get_logger(__name__)


def served_subjects(subscribers: Iterable[Any], service: str) -> list[str]:
    """The RPC subjects of `service` that a broker's subscribers serve."""
    prefix = f"{RPC_PREFIX}{service}."
    found = (_subject_of(s) for s in subscribers)
    return [s for s in found if s.startswith(prefix)]


def _subject_of(subscriber: Any) -> str:
    subject = getattr(subscriber, "subject", None)
    return str(getattr(subject, "broker_address", subject) or "")


def unknown_reply(subject: str, prefix: str, served: Iterable[str]) -> dict[str, Any]:
    operations = sorted(s.removeprefix(prefix) for s in served)
    return error_reply("not_found", f"no operation {subject}", operations=operations)


class UnknownOperations:
    """Answers a service's unknown operations from `start` (after the broker is up, so every
    handler is registered) until `stop`."""

    def __init__(self, broker: Any, service: str, settings: TavernSettings) -> None:
        self.broker, self.service, self.settings = broker, service, settings
        self.conn: NatsConnection | None = None

    async def start(self) -> None:
        prefix = f"{RPC_PREFIX}{self.service}."
        served = frozenset(served_subjects(self.broker.subscribers, self.service))
        conn = self.conn = await connect(self.settings, f"{self.service}-unknown-ops")

        async def on_request(msg: Msg) -> None:
            if msg.subject in served or not msg.reply:
                return
            log.info("rpc_unknown_operation", subject=msg.subject)
            reply = unknown_reply(msg.subject, prefix, served)
            await conn.nc.publish(msg.reply, json.dumps(reply).encode())

        pending = rpc_limits(self.settings).subscription_pending
        await conn.nc.subscribe(
            f"{prefix}>",
            queue=f"{self.service}-rpc-unknown",
            cb=on_request,
            pending_msgs_limit=pending["pending_msgs_limit"],
            pending_bytes_limit=pending["pending_bytes_limit"],
        )

    async def stop(self) -> None:
        if self.conn is not None:
            await self.conn.close()
            self.conn = None
