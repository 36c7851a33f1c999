"""The ledger's figures: recall RPC latency with 100k evidence rows in scope, and ingestion rate
from the SESSIONS stream; each beside a raw asyncpg baseline on the same Postgres. Ingestion has
a second figure, its writes alone, which is the most any ingestion on this schema can do.

Both figures run the real ledger with a fresh nats-server of their own (the `postgres` server
kind gives a measurement only a DSN) and a database of their own. Recall is timed as the loop
asks it, from another process: the ledger runs as `python -m tavern_ledger` with its shipped
settings, and this process signs each request as the loop acting for the session's owner.
Ingestion serves the app in process. The recall corpus is seeded once per bench run into
`bench_ledger_recall` and reused by every repeat; its vectors are made as an upgraded install
makes them (the ledger's own rebuild, before the measured ledger starts). Every database gets the
extensions `tavern up` creates, so the semantic channel is on as shipped; ingestion's time runs
until every row has its vector too, and the share of it spent after the rows were in is printed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import secrets
import shutil
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import nats

from bench.registry import Env, Limits, Result, baseline, figure
from tavern_events import subjects
from tavern_events.ids import new_id
from tavern_events.message import UserMessage, UserMessagePayload
from tavern_events.union import encode, subject_for
from tavern_ledger import app as ledger_app
from tavern_ledger.config import LedgerSettings
from tavern_ledger.domain.admission import cut
from tavern_ledger.domain.claims import CLAIMS_VERSION, claim_domain
from tavern_ledger.domain.extract import ExtractConfig
from tavern_ledger.domain.ids import content_hash, evidence_id, js_json, session_source_ref
from tavern_ledger.domain.ingestion import BatchPlanner, Incoming
from tavern_ledger.domain.records import EvidenceRow
from tavern_ledger.domain.segments import SEGMENTS_VERSION
from tavern_ledger.domain.text import TERMS_VERSION, estimate_tokens
from tavern_ledger.embedding import MODEL, shared_encoder
from tavern_ledger.evidence import ingest as ingest_store
from tavern_ledger.evidence import rows as evidence_store
from tavern_ledger.ingest import PART, parts, prepare
from tavern_ledger.ledger import gate_config
from tavern_ledger.vectors import store as vector_store
from tavern_ledger.vectors.index import PgVectorIndex
from tavern_runtime import pg, principals
from tavern_runtime.auth import Credentials, connect_signed
from tavern_runtime.dbroles import ensure_extensions
from tavern_runtime.embedded import EmbeddedNats
from tavern_runtime.migrations import migrate
from tavern_runtime.provision import provision
from tavern_runtime.service import serve

CORPUS_ROWS = 100_000
TINY_CORPUS_ROWS = 2_000
"""The recall corpus of a smoke run (`--tiny`): seeding 100k rows would be most of its time."""
CORPUS_DB = "bench_ledger_recall"
SCOPE = "bench-chat"
SESSIONS = 200
SEED = 20260501
T0 = datetime(2026, 1, 1, tzinfo=UTC)

_SYLLABLE_TEXT = "ka ri to mu ne sa lo vi pe da zu fo gi ha ji ku me no ra si"
_SYLLABLES = _SYLLABLE_TEXT.split(" ")
_HANZI = (
    "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说"
    "产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点"
    "从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原"
)


def _vocabulary(rng: random.Random, size: int = 3000) -> list[str]:
    words = {"".join(rng.choices(_SYLLABLES, k=rng.randint(2, 4))) for _ in range(size * 2)}
    return sorted(words)[:size]


class Corpus:
    """Deterministic English-like and Chinese texts with Zipf-distributed words."""

    def __init__(self, seed: int = SEED) -> None:
        self.rng = random.Random(seed)
        self.words = _vocabulary(self.rng)
        self.weights = [1 / (rank + 1) for rank in range(len(self.words))]

    def text(self) -> str:
        if self.rng.random() < 0.3:
            return "".join(self.rng.choices(_HANZI, k=self.rng.randint(10, 40)))
        words = self.rng.choices(self.words, weights=self.weights, k=self.rng.randint(8, 24))
        return " ".join(words)

    def query(self) -> str:
        if self.rng.random() < 0.3:
            start = self.rng.randrange(len(_HANZI) - 8)
            return "请问" + _HANZI[start : start + 6] + "是什么"
        picked = self.rng.choices(self.words, weights=self.weights, k=self.rng.randint(3, 8))
        return "what about " + " ".join(picked) + "?"


def _row(i: int, text: str) -> EvidenceRow:
    session = f"bench-s{i % SESSIONS}"
    ref = session_source_ref(session, i + 1)
    digest = content_hash(text)
    return EvidenceRow(
        id=evidence_id(ref, digest),
        scope_id=SCOPE,
        session_id=session,
        source_class="user_input",
        authority="user_explicit",
        claim_domain=claim_domain(text),
        content=text,
        content_hash=digest,
        observed_at=T0 + timedelta(seconds=i),
        confidence=0.9,
        source_ref=js_json(ref),
        source_label="user",
        ingest="session-event",
        tokens=estimate_tokens(text),
    )


def _filed(message: EvidenceRow) -> list[EvidenceRow]:
    kept, claims = cut(message)
    return [kept, *claims]


# --- databases and the app ----------------------------------------------------------------------


async def _create_database(server_dsn: str, name: str) -> bool:
    """Create `name` unless it exists, with the extensions `tavern up` creates; True when it
    was created."""
    admin = await asyncpg.connect(server_dsn)
    try:
        if await admin.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name):
            return False
        await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
    finally:
        await admin.close()
    await ensure_extensions(pg.with_database(server_dsn, name), {"ledger": ledger_app.EXTENSIONS})
    return True


async def _drop_database(server_dsn: str, name: str) -> None:
    admin = await asyncpg.connect(server_dsn)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


def corpus_rows(env: Env) -> int:
    return TINY_CORPUS_ROWS if env.tiny else CORPUS_ROWS


async def _seeded_recall_db(server_dsn: str, rows: int = CORPUS_ROWS) -> str:
    """The recall corpus database: `rows` (100k) messages in one scope, each kept whole and cut
    into its claim, so 100k rows recall reads (seeded once per run; the run's benches ask for
    the same size)."""
    dsn = pg.with_database(server_dsn, CORPUS_DB)
    await _create_database(server_dsn, CORPUS_DB)
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=2)
    try:
        await migrate(pool, ledger_app.migrations())
        count = await pool.fetchval(
            "SELECT count(*) FROM ledger.evidence WHERE scope_id = $1 AND claim_of IS NULL", SCOPE
        )
        if count < rows:
            await _seed(pool, int(count), rows)
        if LedgerSettings().ledger_semantic:  # the shipped setting, or the one asked for
            await _seed_vectors(pool)
    finally:
        await pool.close()
    return dsn


async def _seed_vectors(pool: Any) -> None:
    """The corpus's vectors, made by the ledger's own rebuild as an upgraded install makes
    them (nothing to do once made); its time and rate are printed."""
    index = PgVectorIndex(lambda: pool, shared_encoder())
    started = time.perf_counter()
    made = await index.rebuild()
    if made:
        seconds = time.perf_counter() - started
        print(f"ledger_recall corpus: {made} vectors in {seconds:.0f} s ({made / seconds:.0f}/s)")
        await pool.execute("VACUUM ANALYZE ledger.evidence_vector")


async def _seed(pool: Any, have: int, total: int) -> None:
    corpus = Corpus()
    texts = [corpus.text() for _ in range(total)]
    async with pool.acquire() as conn:
        for start in range(have, total, 2000):
            # Filed as ingestion files a person's message: kept whole, and cut into its claims
            # (one claim each: the texts are one clause), which recall reads.
            messages = [_row(i, texts[i]) for i in range(start, min(start + 2000, total))]
            rows = [row for m in messages for row in _filed(m)]
            async with conn.transaction():
                await evidence_store.insert(conn, rows)
        # the rows were indexed by this tokeniser and filed by these rules, as the ledger would
        # have done: no rebuild when it starts (one would run beside the measured recalls)
        await conn.execute(
            "UPDATE ledger.lexicon SET terms_version = $1, claims_version = $2, "
            "segments_version = $3",
            TERMS_VERSION,
            CLAIMS_VERSION,
            SEGMENTS_VERSION,
        )
        await conn.execute("VACUUM ANALYZE ledger.evidence")
        await conn.execute("VACUUM ANALYZE ledger.evidence_term")


@contextlib.contextmanager
def _directory(given: Path | None, prefix: str) -> Iterator[Path]:
    """`given` (its owner keeps or removes it: the runner keeps a failed bench's), else a
    temporary directory removed on exit."""
    if given is not None:
        yield given
        return
    made = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield made
    finally:
        shutil.rmtree(made, ignore_errors=True)


@contextlib.contextmanager
def _nats_server(root: Path | None = None) -> Iterator[str]:
    with _directory(root, "tavern-bench-ledger-") as where:
        server = EmbeddedNats(where / "nats", sync_always=False)
        server.start()
        try:
            yield server.url
        finally:
            server.stop()


BENCH_KEY = secrets.token_hex(32)
"""The auth key of the in-process ledger: requests are signed and checked as shipped."""
LOOP_FOR_LOCAL = principals.service("loop").acting_for(principals.LOCAL_OWNER)
"""Who asks for recall: the loop in a session of the local owner, as in `tavern up`."""


async def signed(url: str, principal: principals.Principal = LOOP_FOR_LOCAL) -> Any:
    """A client whose every request carries `principal`, signed with the bench's key."""
    return await connect_signed(url, Credentials(BENCH_KEY.encode()), principal)


@contextlib.asynccontextmanager
async def _ledger(nats_url: str, database_url: str, **options: Any) -> AsyncIterator[None]:
    """The ledger app served in process (as `python -m tavern_ledger` would), until exit."""
    nc = await nats.connect(nats_url)
    await provision(nc.jetstream(), consumers=ledger_app.CONSUMERS)
    await nc.close()
    data_dir = Path(tempfile.mkdtemp(prefix="tavern-bench-ledger-run-"))
    settings = LedgerSettings(
        nats_url=nats_url,
        database_url=database_url,
        data_dir=data_dir,
        health_port=0,
        log_level="WARNING",
        log_format="json",
        ledger_rpc_rate_per_s=1e6,
        ledger_rpc_burst=1_000_000,
        auth_key=BENCH_KEY,
        **options,
    )
    stop = asyncio.Event()
    task = asyncio.create_task(serve("ledger", ledger_app.build_app(settings), settings, stop))
    try:
        await _until_answering(nats_url)
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
        shutil.rmtree(data_dir, ignore_errors=True)


@contextlib.asynccontextmanager
async def _ledger_process(
    nats_url: str, database_url: str, root: Path | None = None
) -> AsyncIterator[None]:
    """The ledger as `tavern up` runs it: `python -m tavern_ledger` in a process of its own,
    every setting at its shipped default but where to find NATS, PostgreSQL and the key; its
    data dir and `ledger.log` in `root` when given."""
    nc = await nats.connect(nats_url)
    await provision(nc.jetstream(), consumers=ledger_app.CONSUMERS)
    await nc.close()
    with _directory(root, "tavern-bench-ledger-run-") as data_dir:
        async with _ledger_running(nats_url, database_url, data_dir):
            yield


@contextlib.asynccontextmanager
async def _ledger_running(nats_url: str, database_url: str, data_dir: Path) -> AsyncIterator[None]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAVERN_")}
    env |= {
        "TAVERN_NATS_URL": nats_url,
        "TAVERN_DATABASE_URL": database_url,
        "TAVERN_DATA_DIR": str(data_dir),
        "TAVERN_HEALTH_PORT": "0",
        "TAVERN_LOG_LEVEL": "WARNING",
        "TAVERN_LOG_FORMAT": "json",
        "TAVERN_AUTH_KEY": BENCH_KEY,
    }
    log_path = data_dir / "ledger.log"
    with log_path.open("wb") as out:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tavern_ledger", env=env, stdout=out, stderr=out
        )
    try:
        try:
            await _until_answering(nats_url, timeout=60)
        except TimeoutError:
            raise RuntimeError(log_path.read_text()[-2000:]) from None
        yield
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), 30)
            except TimeoutError:
                process.kill()
                await process.wait()


async def _until_answering(nats_url: str, timeout: float = 30) -> None:
    nc = await nats.connect(nats_url)
    deadline = time.monotonic() + timeout
    try:
        while True:
            with contextlib.suppress(Exception):
                await nc.request(subjects.rpc("ledger", "ping"), b"", timeout=1)
                return
            if time.monotonic() > deadline:
                raise TimeoutError("the ledger did not answer ping")
            await asyncio.sleep(0.1)
    finally:
        await nc.close()


# --- recall -------------------------------------------------------------------------------------


@baseline(
    "pg_recent_select",
    servers=("postgres",),
    count=1000,
    description="asyncpg: 20 newest rows of a 100k-row scope by index, one query per request",
)
async def pg_recent_select(env: Env, n: int) -> Result:
    dsn = await _seeded_recall_db(env.database_url, corpus_rows(env))
    conn = await asyncpg.connect(dsn)
    try:
        query = (
            "SELECT id, content FROM ledger.evidence WHERE scope_id = $1 AND state = 'active' "
            "ORDER BY observed_at DESC LIMIT 20"
        )
        for _ in range(50):
            await conn.fetch(query, SCOPE)
        latencies = []
        started = time.perf_counter()
        for _ in range(n):
            t = time.perf_counter()
            await conn.fetch(query, SCOPE)
            latencies.append((time.perf_counter() - t) * 1000)
        return Result(n, time.perf_counter() - started, tuple(latencies))
    finally:
        await conn.close()


@figure(
    "ledger_recall",
    baseline="pg_recent_select",
    servers=("postgres",),
    count=1000,
    description="tavern.rpc.ledger.recall over NATS as the loop asks it, 100k evidence rows in "
    "scope, mixed EN/ZH; the ledger is `python -m tavern_ledger` with its shipped settings in a "
    "process of its own, the asker this bench's process",
    limits=Limits(p50_ms=5, p99_ms=20),
)
async def ledger_recall(env: Env, n: int) -> Result:
    dsn = await _seeded_recall_db(env.database_url, corpus_rows(env))
    corpus = Corpus(SEED + 1)
    queries = [corpus.query() for _ in range(n + 50)]
    with _nats_server(env.directory("nats")) as url:
        async with _ledger_process(url, dsn, env.directory("ledger")):
            await _bind_sessions(dsn)
            return await _recall_requests(url, queries, n)


async def _bind_sessions(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.executemany(
            "INSERT INTO ledger.ingest_session (session_id, chat_id) VALUES ($1, $2) "
            "ON CONFLICT DO NOTHING",
            [(f"bench-s{i}", SCOPE) for i in range(SESSIONS)],
        )
    finally:
        await conn.close()


async def _recall_requests(url: str, queries: list[str], n: int) -> Result:
    nc = await signed(url)
    subject = subjects.rpc("ledger", "recall")
    try:
        bodies = [
            json.dumps(
                {"session_id": f"bench-s{i % SESSIONS}", "query": q, "turn": i, "step": 1}
            ).encode()
            for i, q in enumerate(queries)
        ]
        for body in bodies[:50]:  # warm-up: prepared statements, caches
            await nc.request(subject, body, timeout=5)
        latencies = []
        started = time.perf_counter()
        for body in bodies[50 : 50 + n]:
            t = time.perf_counter()
            reply = await nc.request(subject, body, timeout=5)
            latencies.append((time.perf_counter() - t) * 1000)
            if b'"error"' in reply.data[:20]:
                raise RuntimeError(reply.data.decode())
        return Result(n, time.perf_counter() - started, tuple(latencies))
    finally:
        await nc.close()


# --- ingestion ----------------------------------------------------------------------------------


@figure(
    "ledger_ingest",
    baseline="pg_executemany",
    servers=("postgres",),
    count=20000,
    description="ledger draining a SESSIONS backlog of user messages into evidence and facts",
    limits=Limits(rate=20_000),
)
async def ledger_ingest(env: Env, n: int) -> Result:
    name = f"bench_ingest_{uuid.uuid4().hex[:8]}"
    await _create_database(env.database_url, name)
    dsn = pg.with_database(env.database_url, name)
    events = _backlog(n)
    try:
        with _nats_server(env.directory("nats")) as url:
            last = await _publish_backlog(url, events)
            async with _ledger(url, dsn):
                started = time.perf_counter()  # the consumer starts as the app starts answering
                return await _drained(dsn, last, len(events), started)
    finally:
        await _drop_database(env.database_url, name)


def _backlog(n: int) -> list[UserMessage]:
    """`n` user messages of 50 sessions, in the order the sessions said them."""
    corpus = Corpus(SEED + 2)
    return [
        UserMessage(
            id=new_id(),
            session_id=f"ingest-s{i % 50}",
            seq=i // 50 + 1,
            ts=T0,
            source="user",
            payload=UserMessagePayload(text=corpus.text()),
        )
        for i in range(n)
    ]


@figure(
    "ledger_ingest_writes",
    baseline="pg_executemany",
    servers=("postgres",),
    count=20000,
    description="ingestion's writes alone, the schema's ceiling: the rows, postings, audits and "
    "facts of ledger_ingest's backlog, planned beforehand, written with ingestion's statements "
    "and batches on one raw asyncpg connection (no bus, no decoding, no gates in the time)",
    limits=Limits(rate=20_000),
)
async def ledger_ingest_writes(env: Env, n: int) -> Result:
    name = f"bench_ingest_writes_{uuid.uuid4().hex[:8]}"
    await _create_database(env.database_url, name)
    dsn = pg.with_database(env.database_url, name)
    try:
        pool = await asyncpg.create_pool(dsn, min_size=1, max_size=1)
        try:
            await migrate(pool, ledger_app.migrations())
        finally:
            await pool.close()
        batches = _planned(_backlog(n))
        conn = await asyncpg.connect(dsn)
        try:
            started = time.perf_counter()
            for last, prepared in batches:
                async with conn.transaction():
                    for part in prepared:
                        await ingest_store.write_part(conn, part)
                    await ingest_store.advance_checkpoint(conn, "bench", last)
            elapsed = time.perf_counter() - started
            stored = await conn.fetchval(MESSAGES_STORED)
        finally:
            await conn.close()
        if stored != n:
            raise RuntimeError(f"wrote {stored} of {n} messages")
        return Result(n, elapsed)
    finally:
        await _drop_database(env.database_url, name)


MESSAGES_STORED = (
    "SELECT count(*) FROM ledger.evidence e WHERE claim_of IS NULL "
    "AND EXISTS (SELECT 1 FROM ledger.evidence c WHERE c.claim_of = e.id)"
)
"""Messages stored with their claims: each event of the backlog is one person's message, kept
whole beside the claims cut from it."""


def _planned(events: list[UserMessage]) -> list[tuple[int, list[ingest_store.PreparedPart]]]:
    """The statements ingestion would write for `events`, batch by batch and part by part
    (batches of the default size, parts of ingestion's size), with each batch's last sequence."""
    settings = LedgerSettings()
    planner = BatchPlanner({}, gate_config(settings), ExtractConfig())
    incoming = [Incoming(seq, event) for seq, event in enumerate(events, start=1)]
    now = datetime.now(UTC)
    batches = []
    for start in range(0, len(incoming), settings.ledger_ingest_batch):
        batch = incoming[start : start + settings.ledger_ingest_batch]
        prepared = [prepare(planner.plan(part), now) for part in parts(batch, PART)]
        batches.append((batch[-1].stream_seq, prepared))
    return batches


async def _publish_backlog(url: str, events: list[UserMessage]) -> int:
    """Store every event on SESSIONS before the ledger starts: the figure is the drain rate."""
    nc = await nats.connect(url)
    js = nc.jetstream(timeout=30)
    try:
        await provision(js, consumers=ledger_app.CONSUMERS)
        last = 0
        for start in range(0, len(events), 256):
            futures = [
                await js.publish_async(subject_for(e), encode(e))
                for e in events[start : start + 256]
            ]
            acks = await asyncio.wait_for(asyncio.gather(*futures), 30)
            last = acks[-1].seq
        return last
    finally:
        await nc.close()


async def _drained(dsn: str, last: int, expected: int, started: float) -> Result:
    """Time until every event is committed, the facts of its evidence are published and every
    row recall may read has its vector (the semantic channel's embedding is in the figure),
    unless `TAVERN_LEDGER_SEMANTIC=false` turned the channel off for a comparison."""
    semantic = LedgerSettings().ledger_semantic
    db = await asyncpg.connect(dsn)
    try:
        while not await _published(db, last):  # noqa: ASYNC110 - polling another process's tables
            await asyncio.sleep(0.01)
        rows_in = time.perf_counter() - started
        while semantic and await vector_store.missing_count(db, MODEL):  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        elapsed = time.perf_counter() - started
        stored = await db.fetchval(MESSAGES_STORED)
        if stored != expected:
            raise RuntimeError(f"ingested {stored} of {expected} events")
        behind = elapsed - rows_in
        print(
            f"ledger_ingest: rows in after {rows_in:.1f} s ({expected / rows_in:,.0f}/s), "
            f"every vector after {elapsed:.1f} s: embedding kept {behind:.1f} s behind"
        )
        extra = {"rows_in_s": round(rows_in, 2), "vectors_behind_s": round(behind, 2)}
        return Result(expected, elapsed, extra=extra)
    finally:
        await db.close()


async def _published(db: Any, last: int) -> bool:
    """The checkpoint passed `last` and the outbox is empty: facts commit with their rows and
    leave the outbox once the LEDGER stream acknowledged them."""
    if await _checkpoint(db) < last:
        return False
    return not await db.fetchval("SELECT EXISTS (SELECT 1 FROM ledger.outbox)")


async def _checkpoint(db: Any) -> int:
    found = await db.fetchval(
        "SELECT stream_seq FROM ledger.ingest_checkpoint WHERE consumer = 'ledger-ingest'"
    )
    return int(found or 0)
