"""`PgVectorIndex`, the semantic channel as shipped: evidence embedded by the sentence model in a
worker thread (the event loop never runs the model), its vectors in `ledger.evidence_vector`.

Ingestion hands over the rows it committed; they are embedded and written in batches behind it,
never inside its transaction. At start, and every `SWEEP_S` after, rows recall may read that have
no vector by the current model (an upgraded install, a replay, a model change, rows restored or
imported since) are embedded in batches, with their progress logged. Without the `vector`
extension the index says so once and finds nothing: recall runs on its lexical channel.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from tavern_ledger.domain import similarity
from tavern_ledger.domain.records import EvidenceRow
from tavern_ledger.embedding import Embedder
from tavern_ledger.evidence.rows import INDEXED_STATES
from tavern_ledger.semantic import SemanticHit
from tavern_ledger.transactions import PoolSource, connection, transaction
from tavern_ledger.vectors import store
from tavern_runtime.logs import get_logger

log = get_logger(__name__)

BATCH = 128
"""Rows embedded and written together."""
PENDING_MAX = 8192
"""Rows waiting for their vectors beyond which ingestion waits (memory stays bounded)."""
BULK_ROWS = 5000
"""A rebuild of this many vectors or more builds the HNSW graph once, after they are in."""
SWEEP_S = 300.0
SIZE_TTL_S = 600.0
Embedded = tuple[list[str], list[float]]
"""Ids and their vectors one after another."""
QUERIES_KEPT = 512
"""Query vectors kept: the loop recalls with the same text at every step of a turn."""


class PgVectorIndex:
    def __init__(self, pool: PoolSource, embedder: Embedder, *, sweep_s: float = SWEEP_S) -> None:
        self._pool, self._embedder, self._sweep_s = pool, embedder, sweep_s
        self.ready = False
        """The table exists: vectors are written and searched."""
        self._pending: deque[EvidenceRow] = deque()
        self._wake = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self._idle = asyncio.Event()
        self._idle.set()
        self._tasks: list[asyncio.Task[None]] = []
        self._sizes: OrderedDict[str, tuple[float, int]] = OrderedDict()
        self._queries: OrderedDict[str, list[float]] = OrderedDict()

    async def start(self) -> None:
        """After the pool opened: find the table (or say why there is none), then write
        vectors behind ingestion and rebuild missing ones, in the background."""
        async with connection(self._pool) as conn:
            self.ready = await store.available(conn)
        if not self.ready:
            log.warning(
                "semantic_channel_off",
                reason="the vector extension is not installed in this database",
                fix="CREATE EXTENSION vector as an administrator (tavern init does), restart",
            )
            return
        self._tasks = [
            asyncio.create_task(self._write_behind(), name="vectors-write-behind"),
            asyncio.create_task(self._sweeps(), name="vectors-rebuild"),
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    async def index(self, rows: Sequence[EvidenceRow]) -> None:
        """Queue committed rows recall may read; waits only while `PENDING_MAX` rows are
        already queued."""
        if not self.ready:
            return
        readable = [r for r in rows if r.state in INDEXED_STATES]
        if not readable:
            return
        await self._room.wait()
        self._pending.extend(readable)
        self._idle.clear()
        self._wake.set()
        if len(self._pending) >= PENDING_MAX:
            self._room.clear()

    async def idle(self) -> None:
        """Every queued row has its vector (or failed to get one: the sweep retries it)."""
        await self._idle.wait()

    async def search(self, scope_id: str, query: str, limit: int) -> Sequence[SemanticHit]:
        if not self.ready or not query.strip():
            return ()
        vector = await self._query_vector(query)
        model = self._embedder.model
        async with connection(self._pool) as conn:
            exact = similarity.exact_search(await self._scope_size(conn, scope_id))
            found = await store.nearest(conn, scope_id, vector, model, limit, exact=exact)
        hits = [SemanticHit(i, similarity.score_of(d)) for i, d in found]
        return sorted(hits, key=lambda h: -h.score)

    async def _query_vector(self, query: str) -> list[float]:
        text = similarity.embedded_text(query)
        found = self._queries.get(text)
        if found is None:
            found = (await asyncio.to_thread(self._embedder.embed, [text]))[0].tolist()
            self._queries[text] = found
            while len(self._queries) > QUERIES_KEPT:
                self._queries.popitem(last=False)
        return found

    async def _scope_size(self, conn: object, scope_id: str) -> int:
        """How many vectors the scope has, counted again every `SIZE_TTL_S`."""
        known = self._sizes.get(scope_id)
        if known is not None and time.monotonic() - known[0] < SIZE_TTL_S:
            return known[1]
        size = await store.scope_size(conn, scope_id, self._embedder.model)
        self._sizes[scope_id] = (time.monotonic(), size)
        while len(self._sizes) > 4096:
            self._sizes.popitem(last=False)
        return size

    async def _write_behind(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            writes = _Writes(self._write)
            while self._pending:
                batch = [self._pending.popleft() for _ in range(min(BATCH, len(self._pending)))]
                if len(self._pending) < PENDING_MAX // 2:
                    self._room.set()
                await writes.put(await self._embed([(r.id, r.content) for r in batch]))
            await writes.drain()
            self._idle.set()

    async def _embed(self, rows: Sequence[tuple[str, str]]) -> Embedded:
        """The rows' ids and their vectors one after another (embedded in a worker thread)."""
        texts = [similarity.embedded_text(content) for _, content in rows]
        vectors = await asyncio.to_thread(self._embedder.embed, texts)
        return [i for i, _ in rows], vectors.ravel().tolist()

    async def _write(self, embedded: Embedded) -> None:
        ids, flat = embedded
        try:
            async with transaction(self._pool) as conn:
                await store.write(conn, ids, flat, self._embedder.model)
        except Exception as exc:  # derived data: the next sweep makes what is missing
            log.warning("vectors_write_failed", error=repr(exc), rows=len(ids))

    async def _sweeps(self) -> None:
        while True:
            try:
                await self.rebuild()
            except Exception as exc:
                log.warning("vectors_rebuild_failed", error=repr(exc))
            await asyncio.sleep(self._sweep_s)

    async def rebuild(self) -> int:
        """Embed every readable row without a vector by the current model; idempotent (a row
        embedded meanwhile is skipped). The number of rows embedded."""
        model = self._embedder.model
        async with connection(self._pool) as conn:
            wanted = await store.missing_count(conn, model)
        if not wanted:
            return 0
        bulk = wanted >= BULK_ROWS
        log.info("vectors_rebuilding", rows=wanted, model=model, graph_rebuilt=bulk)
        started = time.monotonic()
        if bulk:  # searches of large scopes read without the graph meanwhile (slower)
            async with connection(self._pool) as conn:
                await store.drop_graph(conn)
        try:
            done = await self._embed_missing(model, wanted)
        finally:
            async with connection(self._pool) as conn:
                await store.build_graph(conn)
        log.info("vectors_rebuilt", rows=done, seconds=round(time.monotonic() - started, 1))
        return done

    async def _embed_missing(self, model: str, wanted: int) -> int:
        done, after, writes = 0, "", _Writes(self._write)
        while True:
            async with connection(self._pool) as conn:
                rows = await store.missing(conn, model, after, BATCH)
            if not rows:
                await writes.drain()
                return done
            await writes.put(await self._embed([(r.evidence_id, r.content) for r in rows]))
            done, after = done + len(rows), rows[-1].evidence_id
            if done % (BATCH * 40) < BATCH:
                log.info("vectors_rebuild_progress", done=done, of=wanted)


class _Writes:
    """One write in flight while the next batch is embedded: the model runs in this process,
    the graph's inserts in PostgreSQL's, so the two overlap."""

    def __init__(self, write: Callable[[Embedded], Coroutine[Any, Any, None]]) -> None:
        self._write = write
        self._flight: asyncio.Task[None] | None = None

    async def put(self, embedded: Embedded) -> None:
        await self.drain()
        self._flight = asyncio.create_task(self._write(embedded))

    async def drain(self) -> None:
        if self._flight is not None:
            flight, self._flight = self._flight, None
            await flight
