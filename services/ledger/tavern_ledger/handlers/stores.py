"""Memory and variable RPCs, and the session-binding consumer (the stores' registration table).

RPCs: `tavern.rpc.ledger.memory.<op>` and `tavern.rpc.ledger.variable.<op>` (queue group
`ledger-rpc`). Consumer `ledger-bindings` on SESSIONS keeps each session's binding and drops
turn-scope variables when the turn ends.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import asyncpg
from faststream.exceptions import NackMessage
from faststream.nats import JStream, NatsBroker, PullSub

from tavern_events import streams, subjects
from tavern_events.envelope import SessionEvent
from tavern_events.errors import ContractError
from tavern_events.skips import SkipCounter, Skipped
from tavern_events.union import decode_or_skip
from tavern_ledger.config import LedgerSettings
from tavern_ledger.ledger import gate_config
from tavern_ledger.stores import bindings, catchup, outbox, rpc
from tavern_ledger.stores.context import StoreContext
from tavern_ledger.stores.domain.bindings import effect_of
from tavern_ledger.stores.domain.limits import StoreLimits
from tavern_ledger.stores.domain.ratelimit import RateLimiter, RatePolicy
from tavern_ledger.stores.errors import StoreUnavailable
from tavern_ledger.stores.gate import memory_gate
from tavern_runtime.context import Context, Message
from tavern_runtime.dlq import dead_letter
from tavern_runtime.logs import get_logger
from tavern_runtime.pg import Pool
from tavern_runtime.provision import ConsumerSpec
from tavern_runtime.service import RESOURCES_KEY, ServiceResources

log = get_logger(__name__)

SERVICE = "ledger"
RPC_QUEUE = "ledger-rpc"
PUBLISH_TIMEOUT_S = 5.0
RPC_WORKERS = 8
"""Requests of one operation handled at once per replica (the rest queue in memory)."""
BINDINGS_CONSUMER = ConsumerSpec(
    "ledger-bindings",
    streams.SESSIONS.name,
    ("tavern.session.*.session.>", "tavern.session.*.turn.end"),
    max_deliver=20,
    ack_wait_s=30.0,
    description="ledger: session bindings for scopes; turn ends expire turn-scope variables",
)
"""Contract name: the durable consumer the ledger's stores read session events with."""


def register(broker: NatsBroker, settings: LedgerSettings | None = None) -> None:
    """Bind the stores' RPCs and the bindings consumer to `broker`."""
    stores = StoreHandlers(broker, settings or LedgerSettings())
    for op in rpc.OPERATIONS:
        broker.subscriber(subjects.rpc(SERVICE, op.name), queue=RPC_QUEUE, max_workers=RPC_WORKERS)(
            stores.rpc(op)
        )
    broker.subscriber(
        "",
        stream=JStream(streams.SESSIONS.name, declare=False),
        durable=BINDINGS_CONSUMER.name,
        config=BINDINGS_CONSUMER.config(),
        pull_sub=PullSub(batch_size=1, timeout=1.0),
    )(stores.on_session_event)


class StoreHandlers:
    """The stores' handlers of one app: its broker, policy and per-session rate limiter."""

    def __init__(self, broker: NatsBroker, settings: LedgerSettings) -> None:
        self.broker = broker
        self.global_enabled = settings.ledger_global_scope
        self.gate = partial(memory_gate, config=gate_config(settings))
        self.limits = StoreLimits(
            max_request_bytes=settings.ledger_rpc_max_request_bytes,
            max_content_chars=settings.ledger_max_evidence_chars,
        )
        self.limiter = RateLimiter(
            RatePolicy(settings.ledger_rpc_rate_per_s, settings.ledger_rpc_burst)
        )
        self.skips = SkipCounter()

    def rpc(self, op: rpc.Operation[Any]) -> Callable[..., Awaitable[rpc.Reply]]:
        async def handle(
            msg: Message, resources: ServiceResources = Context(RESOURCES_KEY)
        ) -> rpc.Reply:
            ctx = self._context(resources)
            reply = await rpc.serve(ctx, self.limiter, op, msg.body)
            if op.writes and "error" not in reply:  # facts an earlier publish left behind
                await outbox.flush(ctx.pool, ctx.publish)
            return reply

        handle.__name__ = f"{op.name.replace('.', '_')}_rpc"
        return handle

    def _context(self, resources: ServiceResources) -> StoreContext:
        return StoreContext(
            pool=_pool(resources),
            publish=self.publish,
            global_enabled=self.global_enabled,
            limits=self.limits,
            gate=self.gate,
            catch_up=partial(self.catch_up, resources),
        )

    async def catch_up(self, resources: ServiceResources, session_id: str) -> bool:
        """Apply `session_id`'s binding from its log (see `stores.catchup`)."""
        js = self.broker.connection.jetstream(timeout=PUBLISH_TIMEOUT_S)
        effects = await catchup.binding_effects(js, session_id)
        if not effects:
            return False
        async with _pool(resources).acquire() as conn:
            return await catchup.apply_effects(conn, effects)

    async def publish(self, subject: str, data: bytes, msg_id: str) -> None:
        js = self.broker.connection.jetstream(timeout=PUBLISH_TIMEOUT_S)
        await js.publish(subject, data, stream=streams.LEDGER.name, headers={"Nats-Msg-Id": msg_id})

    async def on_session_event(
        self, msg: Message, resources: ServiceResources = Context(RESOURCES_KEY)
    ) -> None:
        """Apply a binding, mode change or turn end; idempotent, ordered by seq."""
        try:
            decoded = decode_or_skip(msg.body, self.skips, SessionEvent)
        except ContractError as exc:
            await self._dead_letter(msg, exc)
            return
        effect = None if isinstance(decoded, Skipped) else effect_of(decoded.event)
        if effect is None:
            return
        try:
            async with _pool(resources).acquire() as conn:
                applied = await bindings.apply(conn, effect)
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, StoreUnavailable) as exc:
            delay = _backoff(msg)
            log.warning("store_binding_retry", error=type(exc).__name__, delay_s=delay)
            raise NackMessage(delay=delay) from None
        if applied == "missing":  # a mode change before its session/created: try again soon
            raise NackMessage(delay=1.0)
        log.info(
            "store_session_event_applied",
            session_id=getattr(effect, "session_id", None),
            subject=msg.raw_message.subject,
            applied=applied,
        )

    async def _dead_letter(self, msg: Message, exc: ContractError) -> None:
        await dead_letter(
            self.broker.connection.jetstream(timeout=PUBLISH_TIMEOUT_S),
            msg.raw_message,
            service=SERVICE,
            consumer=BINDINGS_CONSUMER.name,
            reason=str(exc),
            error=exc,
        )


def _pool(resources: ServiceResources) -> Pool:
    if resources.pool is None:
        raise StoreUnavailable("the ledger has no database pool (starting or stopping)")
    return resources.pool


def _backoff(msg: Message) -> float:
    """1, 2, 4 ... 30 s by delivery count: a database outage must not exhaust max_deliver."""
    delivered = msg.raw_message.metadata.num_delivered or 1
    return float(min(30, 2 ** (delivered - 1)))
