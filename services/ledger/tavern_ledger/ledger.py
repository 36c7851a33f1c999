"""What the handlers call: the ledger's use cases wired to one pool, one JetStream context and the
settings. Built by `build_app` (nothing opens here); the pool arrives with the lifespan.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass

from faststream.nats import NatsBroker
from nats.aio.msg import Msg
from nats.errors import Error as NatsError
from nats.js import JetStreamContext

from tavern_events import subjects
from tavern_events.envelope import SessionEvent
from tavern_events.errors import ContractError
from tavern_events.session import SessionCreated
from tavern_events.skips import SkipCounter
from tavern_events.streams import SESSIONS
from tavern_events.union import Decoded, decode_or_skip
from tavern_ledger import ingest
from tavern_ledger.access import Access
from tavern_ledger.claims import Claims
from tavern_ledger.config import LedgerSettings
from tavern_ledger.consolidation.observations import Observations
from tavern_ledger.domain.composer import ComposerConfig
from tavern_ledger.domain.extract import ExtractConfig, SessionFacts, session_facts_of
from tavern_ledger.domain.gates import GateConfig
from tavern_ledger.domain.ingestion import Incoming
from tavern_ledger.domain.limits import Caps, RateLimiter
from tavern_ledger.domain.records import EvidenceRow
from tavern_ledger.errors import StoreUnavailable
from tavern_ledger.evidence import claimcut, lexicon
from tavern_ledger.ingest import Ingestor
from tavern_ledger.recall.recaller import Recaller, RecallSettings
from tavern_ledger.relay import Relay
from tavern_ledger.rights import Rights
from tavern_ledger.semantic import NoSemanticIndex, SemanticIndex
from tavern_ledger.transactions import PoolSource
from tavern_ledger.transfer import Transfer
from tavern_ledger.vectors.index import PgVectorIndex
from tavern_runtime import dlq, tracing
from tavern_runtime.auth import Credentials
from tavern_runtime.batchconsumer import BatchConsumer
from tavern_runtime.delivery import stream_sequence
from tavern_runtime.errors import ConcurrencyConflict, TransientError
from tavern_runtime.logs import get_logger
from tavern_runtime.pg import Pool
from tavern_runtime.provision import ConsumerSpec
from tavern_runtime.service import ServiceResources
from tavern_runtime.sessionlog import SessionLogReader

log = get_logger(__name__)

INGEST_SUBJECTS = (
    "tavern.session.*.user.message",
    "tavern.session.*.tool.result",
    "tavern.session.*.session.created",
)
"""Only the events ingestion reads (never assistant text, chunks or compactions)."""
LEDGER_KEY = "ledger"
"""Where the app puts its `Ledger` in the FastStream context (`Context(LEDGER_KEY)`)."""
SERVICE = "ledger"
INGEST_DURABLE = "ledger-ingest"
UNCREATED_KEPT = 10_000


@dataclass(frozen=True)
class Poison:
    msg: Msg
    error: Exception


class _Decoding:
    """One batch of deliveries, decoded part by part as ingestion asks for the parts."""

    def __init__(
        self, msgs: Sequence[Msg], decode: Callable[[Msg], Incoming | Poison | None]
    ) -> None:
        self._msgs, self._decode = msgs, decode
        self._done: list[tuple[Msg, Incoming]] = []
        self._through = 0
        """How many of `msgs` are decoded."""
        self.poison: list[Poison] = []

    def sessions(self) -> set[str]:
        """The sessions of the batch, read off the subjects (decoding checks they agree)."""
        found = set()
        for msg in self._msgs:
            with contextlib.suppress(subjects.InvalidIdError):
                found.add(subjects.session_id_of(msg.subject))
        return found

    def parts(self) -> Iterator[list[Incoming]]:
        for part in ingest.parts(self._msgs, ingest.PART):
            yield [item for _, item in self._take(len(part))]

    def decoded(self) -> list[tuple[Msg, Incoming]]:
        """Every message of the batch that is an event to ingest, with its message."""
        self._take(len(self._msgs) - self._through)
        return self._done

    def _take(self, count: int) -> list[tuple[Msg, Incoming]]:
        taken: list[tuple[Msg, Incoming]] = []
        for msg in self._msgs[self._through : self._through + count]:
            decoded = self._decode(msg)
            if isinstance(decoded, Poison):
                self.poison.append(decoded)
            elif decoded is not None:
                taken.append((msg, decoded))
        self._through += count
        self._done += taken
        return taken


def ingest_consumer() -> ConsumerSpec:
    """The ledger's durable consumer on SESSIONS (provisioned by `tavern init`)."""
    return ConsumerSpec(
        name=INGEST_DURABLE,
        stream=SESSIONS.name,
        filter_subjects=INGEST_SUBJECTS,
        max_deliver=100,  # poison is dead-lettered at once; retries are for outages (backoff)
        ack_wait_s=60.0,
        max_ack_pending=10_000,
        description="Ledger ingestion: human input and tool output become evidence.",
    )


def gate_config(settings: LedgerSettings) -> GateConfig:
    return GateConfig(settings.ledger_private_data, settings.ledger_max_evidence_chars)


def recall_settings(settings: LedgerSettings) -> RecallSettings:
    composer = ComposerConfig(
        hot_tokens=settings.ledger_hot_tokens,
        cross_session=settings.ledger_cross_session_policy,
        fusion=settings.ledger_fusion,
        hysteresis=settings.ledger_hysteresis,
        half_life_days=settings.ledger_observation_half_life_days,
        skip_external_tool=settings.ledger_skip_external_tool,
    )
    return RecallSettings(
        composer=composer,
        recent=settings.ledger_recall_limit,
        per_term=settings.ledger_lexical_per_term,
        observations=settings.ledger_observation_injection,
    )


def pool_of(resources: ServiceResources) -> PoolSource:
    """The pool the lifespan opens, once it is open."""

    def pool() -> Pool:
        if resources.pool is None:
            raise StoreUnavailable("the ledger's database pool is not open")
        return resources.pool

    return pool


class Ledger:
    def __init__(
        self,
        settings: LedgerSettings,
        resources: ServiceResources,
        broker: NatsBroker,
        semantic: SemanticIndex | None = None,
        credentials: Credentials | None = None,
        vectors: PgVectorIndex | None = None,
    ) -> None:
        self._resources, self._broker = resources, broker
        self.pool = pool_of(resources)
        self.vectors = vectors
        """The semantic channel's store, when it is pgvector's (started and stopped here)."""
        self._js: JetStreamContext | None = None
        gate = gate_config(settings)
        extract = ExtractConfig(subagent_downgrade=settings.ledger_subagent_downgrade)
        self.ingestor = Ingestor(
            self.pool, INGEST_DURABLE, gate, extract, creations=self.session_creations
        )
        self._uncreated: OrderedDict[str, None] = OrderedDict()
        """Sessions whose logs hold no `session/created` (it would precede every other event)."""
        self.semantic = semantic or vectors or NoSemanticIndex()
        self.recaller = Recaller(
            self.pool, recall_settings(settings), self.semantic, creation=self._creation
        )
        self.credentials = credentials or Credentials.of(settings)
        self.access = Access(self.credentials, self.pool, creation=self._creation)
        self.rights = Rights(self.pool, gate)
        self.claims = Claims(self.pool)
        self.transfer = Transfer(self.pool, gate)
        self.observations = Observations(self.pool, gate)
        self.relay = Relay(self.pool, lambda: self._broker.connection)
        self.limiter = RateLimiter(settings.ledger_rpc_rate_per_s, settings.ledger_rpc_burst)
        self.caps = Caps(
            max_request_bytes=settings.ledger_rpc_max_request_bytes,
            max_results=settings.ledger_rpc_max_results,
        )
        self.skips = SkipCounter()
        self.consumer = BatchConsumer(
            ingest_consumer(),
            self.ingest_messages,
            batch=settings.ledger_ingest_batch,
            wait_s=settings.ledger_ingest_wait_s,
            dead_letters_as=SERVICE,
        )

    async def start(self) -> None:
        """After the broker connected: publish leftover facts, start ingesting, and turn
        messages that exhausted their deliveries into dead letters. Without an auth key the
        service stops here: it could answer no request."""
        self.credentials.ensure()
        await self.relay.flush()
        await self._rebuild_postings()
        if self.vectors is not None:
            await self.vectors.start()
        self.consumer.start(self._broker.connection, self.js())

    async def _rebuild_postings(self) -> None:
        """Postings made by an older tokeniser are rebuilt, claims filed by older rules filed
        again, and messages stored before claims cut into claims, before ingestion adds rows."""
        async with self.pool().acquire() as conn:
            indexed = await lexicon.rebuild_postings(conn)
            reclassified = await lexicon.reclassify_claims(conn)
            cut = await claimcut.cut_stored_messages(conn)
        if cut is not None:
            log.info("claims_cut", messages=cut)
        if indexed is not None:
            log.info("postings_rebuilt", rows=indexed)
        if reclassified is not None:
            log.info("claims_reclassified", rows=reclassified)

    async def stop(self) -> None:
        """Before the broker closes: finish the batch in hand and publish its facts."""
        await self.consumer.stop()
        await self.relay.idle()
        if self.vectors is not None:
            await self.vectors.stop()

    def js(self) -> JetStreamContext:
        if self._js is None:
            self._js = self._broker.connection.jetstream(timeout=5.0)
        return self._js

    async def ingest_messages(self, msgs: Sequence[Msg]) -> None:
        """Ingest one ordered batch in one transaction, decoded part by part while Postgres
        writes the part before; poison messages are dead-lettered once the batch is in. A batch
        that fails for any but a transient reason is retried message by message, and the
        message that still fails is dead-lettered."""
        with tracing.consumed("ledger.ingest", (m.headers for m in msgs)):
            await self._ingest_batch(msgs)

    async def _ingest_batch(self, msgs: Sequence[Msg]) -> None:
        batch = _Decoding(msgs, self._decode)
        through = max(stream_sequence(m) for m in msgs)
        try:
            outcome = await self.ingestor.ingest(batch.parts(), batch.sessions(), through)
            log.info("evidence_ingested", messages=len(msgs), **outcome.counts())
            await self._index(outcome.rows)
        except (TransientError, ConcurrencyConflict):
            raise  # the whole batch is retried later (nak with backoff)
        except Exception as exc:  # refused data or a bug: find the message that causes it
            log.warning("ingest_batch_rejected", error=repr(exc), messages=len(msgs))
            await self._ingest_one_by_one(batch.decoded(), through)
        for poison in batch.poison:
            await self._dead_letter(poison.msg, poison.error)
        self.relay.kick()  # the facts go out while the next batch is read and planned

    async def _ingest_one_by_one(self, incoming: list[tuple[Msg, Incoming]], through: int) -> None:
        for msg, item in incoming:
            try:
                outcome = await self.ingestor.ingest([[item]], {item.event.session_id})
                await self._index(outcome.rows)
            except (TransientError, ConcurrencyConflict):
                raise
            except Exception as exc:  # this message alone fails: park it, go on
                await self._dead_letter(msg, exc)
        await self.ingestor.ingest([], (), through)

    async def session_creations(self, session_ids: Collection[str]) -> dict[str, SessionFacts]:
        """The facts of sessions ingestion has not stored yet, from the `session/created` in
        their logs (sessions whose log has none are remembered and not asked again)."""
        wanted = [s for s in session_ids if s not in self._uncreated]
        found = await asyncio.gather(*(self._creation(s) for s in wanted))
        learned: dict[str, SessionFacts] = {}
        for session_id, facts in zip(wanted, found, strict=True):
            if facts is None:
                self._uncreated[session_id] = None
                if len(self._uncreated) > UNCREATED_KEPT:
                    self._uncreated.popitem(last=False)
            else:
                learned[session_id] = facts
        return learned

    async def _creation(self, session_id: str) -> SessionFacts | None:
        try:
            event = await SessionLogReader(self.js()).last(session_id, "session/created")
        except (NatsError, TimeoutError) as exc:
            raise TransientError("session log unavailable", session_id=session_id) from exc
        except ContractError:
            return None  # unreadable: the consumer dead-letters it when it meets it
        return session_facts_of(event) if isinstance(event, SessionCreated) else None

    async def _index(self, rows: Sequence[EvidenceRow]) -> None:
        """Feed the semantic channel after the commit; its failure never fails ingestion."""
        if not rows:
            return
        try:
            await self.semantic.index(rows)
        except Exception as exc:
            log.warning("semantic_index_failed", error=repr(exc), rows=len(rows))

    def _decode(self, msg: Msg) -> Incoming | Poison | None:
        """A session event to ingest, a poison message, or None (a type this code skips)."""
        try:
            found = decode_or_skip(msg.data, self.skips, SessionEvent)
            if not isinstance(found, Decoded):
                return None
            if found.event.session_id != subjects.session_id_of(msg.subject):
                raise ContractError("event session_id does not match its subject")
            return Incoming(stream_sequence(msg), found.event)
        except (ContractError, subjects.InvalidIdError) as exc:
            return Poison(msg, exc)

    async def _dead_letter(self, msg: Msg, error: Exception) -> None:
        await dlq.dead_letter(
            self.js(), msg, service=SERVICE, consumer=INGEST_DURABLE, reason=str(error), error=error
        )
