"""Memory and variable RPCs, and the session-binding consumer (the stores' registration table).

RPCs: `tavern.rpc.ledger.memory.<op>` and `tavern.rpc.ledger.variable.<op>` (queue group
`ledger-rpc`). Consumer `ledger-bindings` on SESSIONS keeps each session's binding and drops
turn-scope variables when the turn ends.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any, cast

from faststream.nats import NatsBroker
from nats.aio.msg import Msg

from tavern_events import streams, subjects
from tavern_events.envelope import SessionEvent
from tavern_events.errors import ContractError
from tavern_events.skips import SkipCounter, Skipped
from tavern_events.union import decode_or_skip
from tavern_ledger.access import Access
from tavern_ledger.config import LedgerSettings
from tavern_ledger.domain.bindings import Effect, ModeChange, TurnClosed, effect_of
from tavern_ledger.domain.store_limits import StoreLimits
from tavern_ledger.domain.store_ratelimit import RateLimiter, RatePolicy
from tavern_ledger.ledger import LEDGER_KEY, Ledger, gate_config
from tavern_ledger.memorystore.gate import memory_gate
from tavern_ledger.scopes import bindings, catchup
from tavern_ledger.toolcalls import rpc
from tavern_ledger.toolcalls.context import StoreContext
from tavern_ledger.toolcalls.errors import StoreUnavailable
from tavern_runtime.auth import Credentials
from tavern_runtime.batchconsumer import BatchConsumer
from tavern_runtime.context import Context, Message
from tavern_runtime.dlq import dead_letter
from tavern_runtime.errors import ConcurrencyConflict, TransientError
from tavern_runtime.logs import get_logger
from tavern_runtime.pg import Pool
from tavern_runtime.pgerrors import connection, transaction
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
BINDINGS_BATCH = 256
"""Most session events the bindings consumer applies in one transaction."""


def register(broker: NatsBroker, settings: LedgerSettings | None = None) -> StoreHandlers:
    """Bind the stores' RPCs to `broker`; the bindings consumer is the returned handlers'
    `bindings_consumer` (not a FastStream subscriber: it reads ordered batches)."""
    stores = StoreHandlers(broker, settings or LedgerSettings())
    for op in rpc.OPERATIONS:
        broker.subscriber(subjects.rpc(SERVICE, op.name), queue=RPC_QUEUE, max_workers=RPC_WORKERS)(
            stores.rpc(op)
        )
    return stores


class StoreHandlers:
    """The stores' handlers of one app: its broker, policy and per-session rate limiter."""

    def __init__(self, broker: NatsBroker, settings: LedgerSettings) -> None:
        self.broker = broker
        self.credentials = Credentials.of(settings)
        self.access: Access | None = None
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
            msg: Message,
            resources: ServiceResources = Context(RESOURCES_KEY),
            ledger: Ledger = Context(LEDGER_KEY),
        ) -> rpc.Reply:
            ctx = self._context(resources)
            access = self._access(resources)
            reply = await rpc.serve(ctx, self.limiter, op, msg.body, access, msg.headers)
            if op.writes and "error" not in reply:  # its facts are in the outbox: sent meanwhile
                ledger.relay.kick()
            return reply

        handle.__name__ = f"{op.name.replace('.', '_')}_rpc"
        return handle

    def _access(self, resources: ServiceResources) -> Access:
        """One per app, so the session owners it learns are kept across requests."""
        if self.access is None:
            self.access = Access(self.credentials, partial(_pool, resources))
        return self.access

    def _context(self, resources: ServiceResources) -> StoreContext:
        return StoreContext(
            pool=_pool(resources),
            global_enabled=self.global_enabled,
            limits=self.limits,
            gate=self.gate,
            catch_up=partial(self.catch_up, resources),
        )

    async def catch_up(self, resources: ServiceResources, session_id: str) -> bool:
        """Apply `session_id`'s binding from its log (see `scopes.catchup`)."""
        js = self.broker.connection.jetstream(timeout=PUBLISH_TIMEOUT_S)
        effects = await catchup.binding_effects(js, session_id)
        if not effects:
            return False
        async with _pool(resources).acquire() as conn:
            return await catchup.apply_effects(conn, effects)

    def bindings_consumer(self, resources: ServiceResources) -> BatchConsumer:
        """The `ledger-bindings` durable, read in ordered batches (the app starts it after the
        broker connects)."""
        return BatchConsumer(
            BINDINGS_CONSUMER,
            partial(self.on_session_events, resources),
            batch=BINDINGS_BATCH,
            dead_letters_as=SERVICE,
        )

    async def on_session_events(self, resources: ServiceResources, msgs: Sequence[Msg]) -> None:
        """Apply the bindings, mode changes and turn ends of one ordered batch in one
        transaction (each idempotent, ordered by seq). A malformed event is dead-lettered; when
        Postgres refuses the batch, it goes event by event and the event it refuses is
        dead-lettered; a mode change whose session is not bound yet reads the binding from the
        log, else is delivered again later."""
        effects: list[tuple[Msg, Effect]] = []
        for msg in msgs:
            try:
                decoded = decode_or_skip(msg.data, self.skips, SessionEvent)
            except ContractError as exc:
                await self._dead_letter(msg, exc)
                continue
            effect = None if isinstance(decoded, Skipped) else effect_of(decoded.event)
            if effect is not None:
                effects.append((msg, effect))
        if not effects:
            return
        try:
            missing = await self._apply(resources, effects)
        except (TransientError, ConcurrencyConflict):
            raise  # the whole batch again, after a backoff
        except Exception as exc:  # refused data or a bug: find the event that causes it
            log.warning("store_bindings_batch_rejected", error=repr(exc), events=len(effects))
            missing = await self._apply_one_by_one(resources, effects)
        for msg, change in missing:
            await self._unbound(resources, msg, change)
        log.info("store_session_events_applied", events=len(effects), unbound=len(missing))

    async def _apply(
        self, resources: ServiceResources, effects: Sequence[tuple[Msg, Effect]]
    ) -> list[tuple[Msg, ModeChange]]:
        """Apply in one transaction (a lone effect, or a run of turn ends, is one statement
        and needs none); returns the mode changes of sessions not bound yet."""
        missing: list[tuple[Msg, ModeChange]] = []
        one = len(effects) == 1 or all(isinstance(e, TurnClosed) for _, e in effects)
        unit = connection if one else transaction
        async with unit(partial(_pool, resources)) as conn:
            applied = await bindings.apply_all(conn, [effect for _, effect in effects])
        for (msg, effect), outcome in zip(effects, applied, strict=True):
            if outcome == "missing":
                missing.append((msg, cast(ModeChange, effect)))
        return missing

    async def _apply_one_by_one(
        self, resources: ServiceResources, effects: Sequence[tuple[Msg, Effect]]
    ) -> list[tuple[Msg, ModeChange]]:
        missing: list[tuple[Msg, ModeChange]] = []
        for msg, effect in effects:
            try:
                missing += await self._apply(resources, [(msg, effect)])
            except (TransientError, ConcurrencyConflict):
                raise
            except Exception as exc:  # this event alone fails: park it, go on
                await self._dead_letter(msg, exc)
        return missing

    async def _unbound(self, resources: ServiceResources, msg: Msg, change: ModeChange) -> None:
        """A mode change before its session's binding: bind from the log if `session/created`
        is there; else deliver it again later, and dead-letter it on its last delivery."""
        if await self.catch_up(resources, change.session_id):
            return
        delivered = msg.metadata.num_delivered or 1
        if delivered >= BINDINGS_CONSUMER.max_deliver:
            reason = "a mode change of a session whose session/created is not in its log"
            await self._dead_letter(msg, ContractError(reason))
            return
        await msg.nak(delay=min(30.0, 2.0 ** (delivered - 1)))

    async def _dead_letter(self, msg: Msg, exc: Exception) -> None:
        await dead_letter(
            self.broker.connection.jetstream(timeout=PUBLISH_TIMEOUT_S),
            msg,
            service=SERVICE,
            consumer=BINDINGS_CONSUMER.name,
            reason=str(exc),
            error=exc,
        )


def _pool(resources: ServiceResources) -> Pool:
    if resources.pool is None:
        raise StoreUnavailable("the ledger has no database pool (starting or stopping)")
    return resources.pool
