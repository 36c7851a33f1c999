"""The session log on the SESSIONS stream: conditional, gapless, retry-safe appends and replays.

Every append is guarded by the stream sequence of the session's last message (DESIGN.md §2);
several events land as one atomic batch or, asked for, as one pipelined fast-ingest batch that
leaves a prefix when it fails (docs/contract.md, "Pipelined appends"). Replays use ordered
consumers and stop when caught up.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig, DeliverPolicy, Header, PubAck, RawStreamMsg
from nats.js.errors import APIError, NotFoundError

from tavern_events import subjects
from tavern_events.envelope import SessionEvent
from tavern_events.errors import ContractError
from tavern_events.ids import new_id
from tavern_events.skips import SkipCounter
from tavern_events.streams import SESSIONS
from tavern_events.union import Decoded, decode_or_skip, encode
from tavern_runtime import directget, tracing
from tavern_runtime.acks import (
    FAST_BATCH_FLOW,
    WRONG_LAST_SEQUENCE,
    Acks,
    Outgoing,
    pub_ack,
    raise_refusal,
)
from tavern_runtime.delivery import pending, stream_sequence
from tavern_runtime.errors import ConcurrencyConflict, PermanentError, TransientError
from tavern_runtime.logs import get_logger

log = get_logger(__name__)

STREAM = SESSIONS.name
EXPECTED_SUBJECT = "Nats-Expected-Last-Subject-Sequence-Subject"
BATCH_DUPLICATE_ID = 10201
TOO_MANY_INFLIGHT_BATCHES = frozenset({10210, 10211})
"""The server's limits on atomic and on fast-ingest batches in flight (per stream, per server):
back-pressure, try again (nothing of the refused batch was stored)."""
MAX_BATCH = 1000  # nats-server's limit on an atomic batch
FAST_BATCHES_OFF = frozenset({10205})
"""A stream that does not allow fast-ingest batches (`allow_batched` off)."""
BATCH_TIMEOUT_S = 3.0
"""How long nats-server keeps a batch that receives nothing more, as the embedded server and
deploy/nats set it (`jetstream.limits.batch.timeout`; the server's default is 10 s). Only the
first event of a pipelined batch is conditional: a writer paused in the middle of sending one,
that lost its lease meanwhile, must not be able to go on with it. It cannot when the batch is
dropped before the lease could expire, so a holder pipelines only while its lease has more
than `PIPELINE_LEASE_MARGIN_S` left."""
PIPELINE_LEASE_MARGIN_S = BATCH_TIMEOUT_S + 1.0
FAST_BATCH_SERVER = (2, 14)
"""Fast-ingest batches arrived in nats-server 2.14; an older one would store every message of
one as a plain publish, unconditionally, so a pipelined append is never sent to it."""
PUBLISH_TIMEOUT_S = 5.0
IDLE_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Head:
    """The end of one session's log. An empty log is `Head()`; `event` is None when the last
    message is of a type or version this code cannot read."""

    log_seq: int = 0
    stream_seq: int = 0
    event_id: str | None = None
    event: SessionEvent | None = None


@dataclass(frozen=True)
class Appended:
    """The outcome of an append: the events with their `seq`, and the head after them.

    `already` is true when a retry found the same events already at the end of the log.
    """

    events: tuple[SessionEvent, ...]
    head: Head
    already: bool = False


@dataclass(frozen=True)
class LogEntry:
    """One replayed event and where it is stored."""

    stream_seq: int
    event: SessionEvent


@dataclass(frozen=True)
class Malformed:
    """A stored message that is not a readable session event (reported, then passed over)."""

    stream_seq: int
    subject: str
    error: str


# --- pure -----------------------------------------------------------------------------------------


def assign_seqs(
    session_id: str, events: Sequence[SessionEvent], after: int
) -> tuple[SessionEvent, ...]:
    """Number `events` as log positions `after + 1 ...`; refuse foreign or misnumbered events."""
    if not events:
        raise PermanentError("nothing to append", session_id=session_id)
    numbered = []
    for seq, event in enumerate(events, start=after + 1):
        if event.session_id != session_id:
            raise PermanentError("event of another session", event_id=event.id)
        if event.seq not in (0, seq):
            raise PermanentError("event already numbered", event_id=event.id, seq=event.seq)
        numbered.append(event if event.seq == seq else event.model_copy(update={"seq": seq}))
    return tuple(numbered)


def lands_as_tail(head: Head, events: Sequence[SessionEvent]) -> bool:
    """Whether `events` (numbered) are exactly what ends the log at `head` (a retried append)."""
    return head.event_id == events[-1].id and head.log_seq == events[-1].seq


def landed_prefix(head: Head, events: Sequence[SessionEvent]) -> int:
    """How many of `events` (numbered) the log at `head` already ends with: a pipelined
    append, cut short or retried, leaves a prefix of them; 0 when the head is not one of them."""
    index = head.log_seq - events[0].seq
    if 0 <= index < len(events) and events[index].id == head.event_id:
        return index + 1
    return 0


def append_headers(
    session_id: str, event: SessionEvent, expected_stream_seq: int
) -> dict[str, str]:
    """Dedup by event id; conditional on the stream seq of the session's last message."""
    return {
        Header.MSG_ID.value: event.id,
        Header.EXPECTED_LAST_SUBJECT_SEQUENCE.value: str(expected_stream_seq),
        EXPECTED_SUBJECT: subjects.session_filter(session_id),
    }


def batch_headers(batch_id: str, index: int, count: int) -> dict[str, str]:
    """ADR-50 atomic batch headers of message `index` (1-based) of `count`."""
    headers = {Header.BATCH_ID.value: batch_id, Header.BATCH_SEQUENCE.value: str(index)}
    if index == count:
        headers[Header.BATCH_COMMIT.value] = "1"
    return headers


def log_seq_of(data: bytes | None) -> int:
    """The envelope `seq` of stored event bytes, read without validating the event."""
    try:
        seq = json.loads(data or b"").get("seq")
    except (ValueError, AttributeError) as exc:
        raise PermanentError("session log tail is not an event envelope") from exc
    if type(seq) is not int or seq < 1:
        raise PermanentError("session log tail has no log seq", seq=seq)
    return seq


def read_event(data: bytes | None, skipped: SkipCounter | None = None) -> SessionEvent | None:
    """A session event, or None if skipped (unknown type, newer version); raises ContractError."""
    result = decode_or_skip(data or b"", skipped)
    if not isinstance(result, Decoded):
        return None
    if not isinstance(result.event, SessionEvent):
        raise ContractError(f"{result.event.type} is not a session event")
    return result.event


def head_of(msg: RawStreamMsg) -> Head:
    """The head described by the last stored message of a session."""
    try:
        event = read_event(msg.data)
    except ContractError:
        event = None
    headers = msg.headers or {}
    return Head(log_seq_of(msg.data), msg.seq or 0, headers.get(Header.MSG_ID.value), event)


# --- writer ---------------------------------------------------------------------------------------


BATCH_MIN_SINGLE = 8
"""A one-replica stream stages an atomic batch in a file store of its own: about 2.8 ms however
small the batch, against about 0.45 ms for one fsynced append (bench/, this machine)."""
BATCH_MIN_REPLICATED = 2
"""A replicated stream stages a batch in memory and commits it in one consensus round: two
events as a batch cost about 1.6 ms on a local 3-node cluster, one by one about 2.8 ms."""


class _WrongLastSequence(Exception):
    """The server refused the append's expectation (or a batch repeated known ids)."""


class _Prefix(Exception):
    """A pipelined batch stopped early: the stream holds its first `count` messages, the last
    of them at stream sequence `seq`."""

    def __init__(self, count: int, seq: int) -> None:
        super().__init__(count, seq)
        self.count, self.seq = count, seq


class _AlreadyStored(Exception):
    """The server already stored a message with this event's id (within its duplicate window),
    before checking the expectation (a replicated stream checks ids first)."""


class HeadCache:
    """The last known head per session, bounded (least recently used goes first)."""

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._heads: OrderedDict[str, Head] = OrderedDict()

    def get(self, session_id: str) -> Head | None:
        head = self._heads.get(session_id)
        if head is not None:
            self._heads.move_to_end(session_id)
        return head

    def put(self, session_id: str, head: Head) -> None:
        self._heads[session_id] = head
        self._heads.move_to_end(session_id)
        while len(self._heads) > self._size:
            self._heads.popitem(last=False)

    def drop(self, session_id: str) -> None:
        self._heads.pop(session_id, None)


class SessionLogWriter:
    """Appends events to session logs; safe against racing writers and retried appends."""

    def __init__(
        self, nc: Client, *, timeout: float = PUBLISH_TIMEOUT_S, replicas: int = 1
    ) -> None:
        self.batch_min = BATCH_MIN_REPLICATED if replicas > 1 else BATCH_MIN_SINGLE
        """From how many events on one append an atomic batch beats appending one by one."""
        self._pipelines = replicas == 1
        """One replica: a replicated stream commits an atomic batch in one consensus round,
        which is cheaper. Turned off when the stream refuses fast batches."""
        self._nc = nc
        self._js = nc.jetstream(timeout=timeout)
        self._acks = Acks(nc)
        self._timeout = timeout
        self.heads = HeadCache()

    async def head(self, session_id: str) -> Head:
        """The head as the stream stores it now (a direct get); refreshes the cache."""
        head = await read_head(self._js, session_id, direct=True)
        self.heads.put(session_id, head)
        return head

    async def append(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        *,
        expected_last: int,
        payloads: Sequence[bytes] | None = None,
        pipelined: bool = False,
    ) -> Appended:
        """Append `events` after log position `expected_last` (0 = empty log), all or nothing.

        Raises `ConcurrencyConflict` if the log has moved on (reload and decide again). Calling
        again with the same events and expectation after an unknown outcome is safe: if they
        landed, the result says `already`. `payloads` are the events already encoded (each
        numbered for its position), so that encoding stays off the append's path.

        `pipelined=True` gives up all-or-nothing for speed (where `pipelines`): the events go
        as one fast-ingest batch, sent without waiting for each other. The first is
        conditional, the rest follow it in order, and the stream stops at the first that fails
        or goes missing, so a failure leaves a prefix of them. A call that finds such a
        prefix (its own, cut short, or a retry's) appends the rest after it.
        """
        numbered = assign_seqs(session_id, events, expected_last)
        if payloads is not None and any(n is not e for n, e in zip(numbered, events, strict=True)):
            payloads = None  # numbered here: encoded before they had their seqs
        encoded = list(payloads) if payloads is not None else [encode(e) for e in numbered]
        pipelined = pipelined and self.pipelines
        head = await self._expected_head(session_id, expected_last)
        if head.log_seq != expected_last:  # confirm with the leader: a replica may lag
            head = await read_head(self._js, session_id, direct=False)
            return await self._settle(session_id, numbered, encoded, head, pipelined)
        try:
            ack = await self._publish(session_id, numbered, head.stream_seq, encoded, pipelined)
        except _WrongLastSequence:
            head = await read_head(self._js, session_id, direct=False)
            return await self._settle(session_id, numbered, encoded, head, pipelined)
        except _AlreadyStored as exc:
            head = await read_head(self._js, session_id, direct=False)
            if not landed_prefix(head, numbered):  # stored elsewhere in the log: a caller bug
                raise PermanentError(
                    "event id already in the session log", event_id=str(exc)
                ) from exc
            return await self._settle(session_id, numbered, encoded, head, pipelined)
        except _Prefix as cut:
            last = numbered[cut.count - 1] if cut.count else None
            head = (
                Head(last.seq, cut.seq, last.id, last)
                if last is not None
                else await read_head(self._js, session_id, direct=False)
            )
            log.info("append_cut_short", session_id=session_id, stored=cut.count, n=len(numbered))
            return await self._settle(session_id, numbered, encoded, head, pipelined)
        new_head = Head(numbered[-1].seq, ack.seq, numbered[-1].id, numbered[-1])
        self.heads.put(session_id, new_head)
        log.debug("event_appended", session_id=session_id, seq=new_head.log_seq, n=len(numbered))
        return Appended(numbered, new_head)

    async def _expected_head(self, session_id: str, expected_last: int) -> Head:
        cached = self.heads.get(session_id)
        if cached is not None and cached.log_seq == expected_last:
            return cached
        return await self.head(session_id)

    async def _settle(
        self,
        session_id: str,
        numbered: tuple[SessionEvent, ...],
        encoded: list[bytes],
        head: Head,
        pipelined: bool,
    ) -> Appended:
        """After a refused expectation: our own earlier append (whole, or a prefix of it whose
        rest is appended now), or someone else's."""
        self.heads.put(session_id, head)
        if lands_as_tail(head, numbered):
            log.info("append_already_done", session_id=session_id, seq=head.log_seq)
            return Appended(numbered, head, already=True)
        landed = landed_prefix(head, numbered)
        if landed:
            rest = await self.append(
                session_id,
                numbered[landed:],
                expected_last=head.log_seq,
                payloads=encoded[landed:],
                pipelined=pipelined,
            )
            return Appended(numbered, rest.head)
        expected = numbered[0].seq - 1
        log.info("append_conflict", session_id=session_id, expected=expected, actual=head.log_seq)
        raise ConcurrencyConflict(
            "session log moved on", session_id=session_id, expected=expected, actual=head.log_seq
        )

    async def _publish(
        self,
        session_id: str,
        events: tuple[SessionEvent, ...],
        expected_stream_seq: int,
        encoded: list[bytes],
        pipelined: bool,
    ) -> PubAck:
        attributes = lambda: _append_attrs(events)  # noqa: E731 - made only when tracing is on
        with tracing.span("sessionlog.append", kind="producer", attributes=attributes):
            return await self._publish_events(
                session_id, events, encoded, expected_stream_seq, pipelined
            )

    async def _publish_events(
        self,
        session_id: str,
        events: tuple[SessionEvent, ...],
        encoded: list[bytes],
        expected_stream_seq: int,
        pipelined: bool,
    ) -> PubAck:
        try:
            if len(events) == 1:
                return await self._publish_one(
                    session_id, events[0], encoded[0], expected_stream_seq
                )
            if pipelined:
                return await self._publish_pipelined(
                    session_id, events, encoded, expected_stream_seq
                )
            return await self._publish_batch(session_id, events, encoded, expected_stream_seq)
        except APIError as exc:
            if exc.err_code in WRONG_LAST_SEQUENCE or exc.err_code == BATCH_DUPLICATE_ID:
                raise _WrongLastSequence from exc
            if pipelined and exc.err_code in FAST_BATCHES_OFF:
                log.warning("fast_batches_refused", session_id=session_id, why=exc.description)
                self._pipelines = False  # the stream does not allow them: append as before
                return await self._publish_events(
                    session_id, events, encoded, expected_stream_seq, False
                )
            if exc.err_code in TOO_MANY_INFLIGHT_BATCHES:
                self.heads.drop(session_id)
                raise TransientError("too many batches in flight", session_id=session_id) from exc
            raise PermanentError(
                "append refused", err_code=exc.err_code, why=exc.description
            ) from exc
        except nats.errors.Error as exc:
            self.heads.drop(session_id)  # the outcome is unknown: re-read before the next append
            raise TransientError("append outcome unknown", session_id=session_id) from exc

    async def _publish_one(
        self, session_id: str, event: SessionEvent, payload: bytes, expected: int
    ) -> PubAck:
        headers = tracing.inject(append_headers(session_id, event, expected))
        subject = subjects.session_event(session_id, event.type)
        ack = await self._acks.publish(subject, payload, headers=headers, timeout=self._timeout)
        if ack.duplicate:  # a replicated stream checks ids before expectations: a retry of ours?
            raise _AlreadyStored(event.id)
        return ack

    async def _publish_pipelined(
        self,
        session_id: str,
        events: tuple[SessionEvent, ...],
        payloads: list[bytes],
        expected: int,
    ) -> PubAck:
        """Up to FAST_BATCH_FLOW events as one fast-ingest batch; more as several in a row,
        each conditional on where the one before ended."""
        stored = 0
        ack: PubAck | None = None
        while stored < len(events):
            part = events[stored : stored + FAST_BATCH_FLOW]
            bodies = payloads[stored : stored + FAST_BATCH_FLOW]
            if len(part) == 1:
                ack = await self._publish_one(session_id, part[0], bodies[0], expected)
            else:
                messages = pipelined_messages(session_id, part, bodies, expected)
                ack = await self._publish_fast(messages, part[0].id)
            if ack.batch_size is not None and ack.batch_size < len(part):
                raise _Prefix(stored + ack.batch_size, ack.seq)
            stored += len(part)
            expected = ack.seq
        assert ack is not None
        return ack

    async def _publish_fast(self, messages: list[Outgoing], first_id: str) -> PubAck:
        ack = pub_ack(await self._acks.pipelined(messages, timeout=self._timeout))
        if ack.duplicate:  # the first was stored before (a retry of ours?): nothing else was
            raise _AlreadyStored(first_id)
        return ack

    @property
    def pipelines(self) -> bool:
        """Whether `append(..., pipelined=True)` sends several events as one fast-ingest
        batch (one replica, a server that knows them, a stream that allows them)."""
        version = self._nc.connected_server_version
        return self._pipelines and (version.major, version.minor) >= FAST_BATCH_SERVER

    async def _publish_batch(
        self,
        session_id: str,
        events: tuple[SessionEvent, ...],
        payloads: list[bytes],
        expected: int,
    ) -> PubAck:
        if len(events) > MAX_BATCH:
            raise PermanentError("batch too large", size=len(events), limit=MAX_BATCH)
        batch_id, count = new_id(), len(events)
        first, last = events[0], events[-1]
        headers = append_headers(session_id, first, expected) | batch_headers(batch_id, 1, count)
        tracing.inject(headers)
        # The first message is a request so that a refused batch start is reported at once.
        reply = await self._acks.request(
            _subject(first), payloads[0], headers=headers, timeout=self._timeout
        )
        raise_refusal(reply)
        for index in range(2, count):
            event = events[index - 1]
            headers = {Header.MSG_ID.value: event.id, **batch_headers(batch_id, index, count)}
            await self._nc.publish(
                _subject(event), payloads[index - 1], headers=tracing.inject(headers)
            )
        headers = {Header.MSG_ID.value: last.id, **batch_headers(batch_id, count, count)}
        tracing.inject(headers)
        return await self._acks.publish(
            _subject(last), payloads[-1], headers=headers, timeout=self._timeout
        )


def pipelined_messages(
    session_id: str, events: Sequence[SessionEvent], payloads: Sequence[bytes], expected: int
) -> list[Outgoing]:
    """A pipelined batch's messages: the first conditional, the rest with only their ids."""
    first = tracing.inject(append_headers(session_id, events[0], expected))
    messages: list[Outgoing] = [(_subject(events[0]), payloads[0], first)]
    for event, payload in zip(events[1:], payloads[1:], strict=True):
        messages.append((_subject(event), payload, tracing.inject({Header.MSG_ID.value: event.id})))
    return messages


def _append_attrs(events: tuple[SessionEvent, ...]) -> dict[str, str | int]:
    first = events[0]
    return {
        "tavern.session_id": first.session_id,
        "tavern.seq": first.seq,
        "tavern.event_types": ",".join(dict.fromkeys(e.type for e in events)),
        "messaging.batch.message_count": len(events),
    }


def _subject(event: SessionEvent) -> str:
    return subjects.session_event(event.session_id, event.type)


async def read_head(js: JetStreamContext, session_id: str, *, direct: bool) -> Head:
    """The session's last message. `direct=False` asks the stream leader (never stale)."""
    try:
        msg = await js.get_last_msg(STREAM, subjects.session_filter(session_id), direct=direct)
    except NotFoundError:
        return Head()
    return head_of(msg)


# --- reader ---------------------------------------------------------------------------------------


@dataclass
class SessionLogReader:
    """Replays session logs in order; skips (and counts) events it does not know, reports
    malformed ones, and stops once caught up."""

    js: JetStreamContext
    skipped: SkipCounter = field(default_factory=SkipCounter)
    malformed: list[Malformed] = field(default_factory=list)
    idle_timeout: float = IDLE_TIMEOUT_S

    def session(
        self,
        session_id: str,
        *,
        from_seq: int = 1,
        from_stream_seq: int | None = None,
        since: datetime | None = None,
    ) -> AsyncIterator[LogEntry]:
        """One session's events with log seq >= `from_seq` (and, if given, stored at or after
        `from_stream_seq` / `since`). Close it early with `contextlib.aclosing`."""
        start = _start(from_stream_seq, since)
        return self._replay(subjects.session_filter(session_id), start, from_seq)

    def all_sessions(
        self, *, from_stream_seq: int | None = None, since: datetime | None = None
    ) -> AsyncIterator[LogEntry]:
        """Every session's events in stream order."""
        return self._replay(subjects.SESSIONS_ALL, _start(from_stream_seq, since), 1)

    async def events(self, session_id: str, *, from_seq: int = 1) -> list[SessionEvent]:
        """The readable events of one session, in log order (batched direct gets: no consumer)."""
        found, _ = await self.read(session_id)
        return [event for event in found if event.seq >= from_seq]

    async def last(self, session_id: str, event_type: str) -> SessionEvent | None:
        """The last event of `event_type` in one session's log (None when it has none, or
        one of a type or version this code skips); raises `ContractError` when unreadable."""
        subject = subjects.session_event(session_id, event_type)
        try:
            msg = await self.js.get_last_msg(STREAM, subject)
        except NotFoundError:
            return None
        return read_event(msg.data, self.skipped)

    async def read(
        self, session_id: str, *, after_stream_seq: int = 0
    ) -> tuple[list[SessionEvent], int]:
        """The readable events of one session stored after `after_stream_seq`, in log order,
        and the stream seq of the last of its messages read (`after_stream_seq` if none)."""
        found: list[SessionEvent] = []
        last = after_stream_seq
        nc: Client = self.js._nc
        subject = subjects.session_filter(session_id)
        async for msg in directget.scan(nc, STREAM, subject, from_seq=after_stream_seq + 1):
            last = msg.seq
            entry = self._stored(msg.seq, msg.subject, msg.data)
            if entry is not None:
                found.append(entry.event)
        return found, last

    async def _replay(
        self, filter_subject: str, start: dict[str, Any], from_seq: int
    ) -> AsyncIterator[LogEntry]:
        sub = await self.js.subscribe(filter_subject, stream=STREAM, ordered_consumer=True, **start)
        try:
            if await _nothing_stored(sub):
                return  # never wait for a message that will not come
            while True:
                msg = await self._next(sub)
                entry = self._entry(msg)
                if entry is not None and entry.event.seq >= from_seq:
                    yield entry
                if pending(msg) == 0:
                    return
        finally:
            await sub.unsubscribe()

    async def _next(self, sub: JetStreamContext.PushSubscription) -> Msg:
        try:
            return await sub.next_msg(timeout=self.idle_timeout)
        except nats.errors.TimeoutError as exc:
            raise TransientError("replay stalled", timeout=self.idle_timeout) from exc

    def _entry(self, msg: Msg) -> LogEntry | None:
        return self._stored(stream_sequence(msg), msg.subject, msg.data)

    def _stored(self, stream_seq: int, subject: str, data: bytes | None) -> LogEntry | None:
        try:
            event = read_event(data, self.skipped)
        except ContractError as exc:
            self._report(Malformed(stream_seq, subject, str(exc)))
            return None
        if event is None:
            log.debug("event_skipped", subject=subject, stream_seq=stream_seq)
            return None
        if event.session_id != subjects.session_id_of(subject):
            self._report(Malformed(stream_seq, subject, "session id differs from subject"))
            return None
        return LogEntry(stream_seq, event)

    def _report(self, malformed: Malformed) -> None:
        log.error(
            "malformed_event",
            subject=malformed.subject,
            stream_seq=malformed.stream_seq,
            error=malformed.error,
        )
        self.malformed.append(malformed)


def _start(from_stream_seq: int | None, since: datetime | None) -> dict[str, Any]:
    if from_stream_seq is not None:
        return {
            "deliver_policy": DeliverPolicy.BY_START_SEQUENCE,
            "config": ConsumerConfig(opt_start_seq=from_stream_seq),
        }
    if since is not None:
        return {
            "deliver_policy": DeliverPolicy.BY_START_TIME,
            "config": ConsumerConfig(opt_start_time=since),
        }
    return {"deliver_policy": DeliverPolicy.ALL}


async def _nothing_stored(sub: JetStreamContext.PushSubscription) -> bool:
    info = await sub.consumer_info()
    delivered = info.delivered.consumer_seq if info.delivered else 0
    return info.num_pending == 0 and delivered == 0
