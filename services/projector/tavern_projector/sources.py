"""Where replays read from: a stream (an ephemeral pull consumer, no acks) or the archive.

Both yield batches of `Entry` in stream order and stop once caught up with what was stored
when they started; a caller that must not miss later entries reads the tail again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from tavern_events import subjects
from tavern_projector.framework import Entry
from tavern_runtime.errors import TransientError
from tavern_runtime.logs import get_logger
from tavern_runtime.pull import Pull

log = get_logger(__name__)

BATCH = 1024
PUSH_QUEUE = 8192
FETCH_TIMEOUT_S = 5.0
INACTIVE_S = 60.0


@dataclass(frozen=True)
class Start:
    """Where a replay starts: a stream sequence, a time, or the beginning."""

    stream_seq: int | None = None
    since: datetime | None = None

    def consumer_options(self) -> dict[str, Any]:
        if self.stream_seq is not None:
            return {
                "deliver_policy": DeliverPolicy.BY_START_SEQUENCE,
                "opt_start_seq": self.stream_seq,
            }
        if self.since is not None:
            return {"deliver_policy": DeliverPolicy.BY_START_TIME, "opt_start_time": self.since}
        return {"deliver_policy": DeliverPolicy.ALL}


def narrow(filters: Sequence[str], session_id: str) -> list[str]:
    """Filter subjects of one session (`tavern.session.*.x` -> `tavern.session.<sid>.x`)."""
    sid = subjects.validate_id(session_id, what="session id")
    return [
        f"tavern.session.{sid}.>" if f == subjects.SESSIONS_ALL else f.replace(".*.", f".{sid}.", 1)
        for f in filters
    ]


@lru_cache(maxsize=256)
def matcher(filters: tuple[str, ...]) -> Callable[[str], bool]:
    """One compiled test for a set of NATS filters (a regex: one call per subject)."""
    parts = []
    for pattern in filters:
        tokens = [
            r"[^.]+" if t == "*" else r"[^.]+(?:\.[^.]+)*" if t == ">" else re.escape(t)
            for t in pattern.split(".")
        ]
        parts.append(r"\.".join(tokens))
    compiled = re.compile(f"^(?:{'|'.join(parts)})$")
    return lambda subject: compiled.match(subject) is not None


def subject_matches(pattern: str, subject: str) -> bool:
    """NATS wildcard matching: `*` one token, `>` the rest."""
    want, have = pattern.split("."), subject.split(".")
    for index, token in enumerate(want):
        if token == ">":
            return len(have) > index
        if index >= len(have) or (token != "*" and token != have[index]):
            return False
    return len(want) == len(have)


async def pending(
    js: JetStreamContext, stream: str, filters: Sequence[str], start: Start = Start()
) -> int:
    """How many entries a stream replay would read now (for progress bars)."""
    async with _consumer(js, stream, filters, start, headers_only=True) as (_, info):
        return int(info.num_pending or 0)


async def stream_batches(
    js: JetStreamContext,
    stream: str,
    filters: Sequence[str],
    start: Start = Start(),
    *,
    batch: int = BATCH,
    headers_only: bool = False,
    push: bool = False,
) -> AsyncGenerator[list[Entry], None]:
    """Stored messages matching `filters` from `start`, in order, in batches.

    A consumer with several filters is several times slower on the server than one with a
    single filter, so when most of what a single broader filter reads would match anyway,
    that one is read and the rest dropped here. With `push` (operators: it needs the right
    to answer flow control, `$JS.FC.<stream>.>`), a single filter is read through an ordered
    push consumer, about twice as fast as pulling; otherwise batches are pulled one ahead.
    """
    chosen = await _read_filters(js, stream, filters, start)
    if push and len(chosen) == 1:
        batches = _pushed(js, stream, chosen[0], start, batch, headers_only)
    else:
        batches = _pulled(js, stream, chosen, start, batch, headers_only)
    narrowed = chosen != list(filters)
    async with contextlib.aclosing(batches) as reading:
        async for msgs in reading:
            found = [Entry.of(m) for m in msgs]
            if narrowed:
                wanted = matcher(tuple(filters))
                found = [e for e in found if wanted(e.subject)]
            if found:
                yield found


async def _pulled(
    js: JetStreamContext,
    stream: str,
    filters: Sequence[str],
    start: Start,
    batch: int,
    headers_only: bool,
) -> AsyncGenerator[list[Any], None]:
    async with _consumer(js, stream, filters, start, headers_only=headers_only) as (pull, info):
        if not info.num_pending:
            return
        async with contextlib.aclosing(_prefetched(pull, batch)) as reading:
            async for msgs in reading:
                yield msgs


async def _pushed(
    js: JetStreamContext,
    stream: str,
    subject: str,
    start: Start,
    batch: int,
    headers_only: bool,
) -> AsyncGenerator[list[Any], None]:
    buffer = _Buffer(PUSH_QUEUE)
    options = start.consumer_options()
    policy = options.pop("deliver_policy")
    config = ConsumerConfig(headers_only=headers_only or None, **options)
    sub = await js.subscribe(
        subject,
        stream=stream,
        ordered_consumer=True,
        cb=buffer.put,
        deliver_policy=policy,
        config=config,
    )
    try:
        info = await sub.consumer_info()
        if not info.num_pending and not (info.delivered and info.delivered.consumer_seq):
            return
        while True:
            msgs = await buffer.take(batch)
            yield msgs
            if msgs[-1].metadata.num_pending == 0:
                return
    finally:
        await sub.unsubscribe()


class _Buffer:
    """Messages pushed by the server, taken in batches. Bounded: a full buffer holds the
    subscription's callback, hence flow-control replies, hence the server."""

    def __init__(self, limit: int) -> None:
        self.items: deque[Any] = deque()
        self.limit = limit
        self.arrived, self.drained = asyncio.Event(), asyncio.Event()

    async def put(self, msg: Any) -> None:
        while len(self.items) >= self.limit:
            self.drained.clear()
            await self.drained.wait()
        self.items.append(msg)
        self.arrived.set()

    async def take(self, batch: int) -> list[Any]:
        while not self.items:
            self.arrived.clear()
            try:
                await asyncio.wait_for(self.arrived.wait(), FETCH_TIMEOUT_S)
            except TimeoutError as exc:
                raise TransientError("replay stalled", timeout=FETCH_TIMEOUT_S) from exc
        taken = [self.items.popleft() for _ in range(min(batch, len(self.items)))]
        self.drained.set()
        return taken


async def _prefetched(pull: Pull, batch: int) -> AsyncGenerator[list[Any], None]:
    """Batches until the consumer has nothing pending; the next one is asked for as soon as
    one is taken, and arrives while the reader works on it (`Pull.take`)."""
    while True:
        msgs = await pull.take(batch, FETCH_TIMEOUT_S)
        if not msgs:
            raise TransientError("replay stalled", timeout=FETCH_TIMEOUT_S)
        yield msgs
        if msgs[-1].metadata.num_pending == 0:
            return


def broader(filters: Sequence[str]) -> str:
    """The narrowest single filter covering all of `filters` (shared tokens, then `>`)."""
    split = [f.split(".") for f in filters]
    shared = []
    for tokens in zip(*split, strict=False):
        if len(set(tokens)) != 1 or tokens[0] == ">":
            break
        shared.append(tokens[0])
    return ".".join([*shared, ">"])


async def _read_filters(
    js: JetStreamContext, stream: str, filters: Sequence[str], start: Start
) -> list[str]:
    if len(filters) < 2:
        return list(filters)
    wide = broader(filters)
    async with (
        _consumer(js, stream, filters, start, headers_only=True) as (_, narrow),
        _consumer(js, stream, [wide], start, headers_only=True) as (_, broad),
    ):
        matching, total = int(narrow.num_pending or 0), int(broad.num_pending or 0)
    return [wide] if matching * 3 >= total else list(filters)


@contextlib.asynccontextmanager
async def _consumer(
    js: JetStreamContext, stream: str, filters: Sequence[str], start: Start, *, headers_only: bool
) -> AsyncIterator[tuple[Pull, Any]]:
    # Unnamed: created through `$JS.API.CONSUMER.CREATE.<stream>`, which the projector may use.
    config = ConsumerConfig(
        filter_subjects=list(filters),
        ack_policy=AckPolicy.NONE,
        inactive_threshold=INACTIVE_S,
        mem_storage=True,
        headers_only=headers_only or None,
        **start.consumer_options(),
    )
    info = await js.add_consumer(stream, config)
    pull = Pull(js._nc, stream, info.name)  # raw requests: see tavern_runtime.pull
    await pull.open()
    try:
        yield pull, info
    finally:
        # Not deleted: no service may delete a consumer (deploy/nats/accounts.conf), and asking
        # is refused with a permissions error on the connection. It expires after INACTIVE_S.
        # Nothing to hand back: it acknowledges nothing (AckPolicy.NONE).
        await pull.close(0.0)


async def archive_batches(
    pool: Any,
    filters: Sequence[str],
    start: Start = Start(),
    *,
    session_id: str | None = None,
    batch: int = 1000,
) -> AsyncIterator[list[Entry]]:
    """Archived session events matching `filters`, in stream order, in batches."""
    after = (start.stream_seq or 1) - 1
    while True:
        rows = await _archive_page(pool, after, start.since, session_id, batch)
        if not rows:
            return
        after = rows[-1]["stream_seq"]
        wanted = matcher(tuple(filters))
        found = [e for e in map(_archived, rows) if wanted(e.subject)]
        if found:
            yield found


async def archive_count(pool: Any, start: Start = Start(), session_id: str | None = None) -> int:
    async with pool.acquire() as conn:
        found = await conn.fetchval(
            """SELECT count(*) FROM projector.session_events
               WHERE stream_seq >= $1 AND ($2::timestamptz IS NULL OR stored_at >= $2)
                 AND ($3::text IS NULL OR session_id = $3)""",
            start.stream_seq or 1,
            start.since,
            session_id,
        )
    return int(found or 0)


async def _archive_page(
    pool: Any, after: int, since: datetime | None, session_id: str | None, batch: int
) -> list[Any]:
    async with pool.acquire() as conn:
        rows: list[Any] = await conn.fetch(
            """SELECT stream_seq, subject, headers, data, stored_at FROM projector.session_events
               WHERE stream_seq > $1 AND ($2::timestamptz IS NULL OR stored_at >= $2)
                 AND ($3::text IS NULL OR session_id = $3)
               ORDER BY stream_seq LIMIT $4""",
            after,
            since,
            session_id,
            batch,
        )
    return rows


def _archived(row: Any) -> Entry:
    headers = json.loads(row["headers"]) if isinstance(row["headers"], str) else row["headers"]
    return Entry(row["stream_seq"], row["subject"], bytes(row["data"]), headers, row["stored_at"])
