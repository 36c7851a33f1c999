"""The memory stack the recall benches drive: a fresh nats-server and PostgreSQL, provisioned, with
the ledger and the consolidator served in process as `python -m tavern_ledger` and
`python -m tavern_consolidator` would serve them, with their shipped settings.

Only the ledger's RPC rate limit is lifted (a bench asks thousands of questions a minute; the limit
guards a deployment from one noisy client and changes nothing recall returns). The consolidator
runs without a model (`TAVERN_LLM_*` unset: its offline rule path), as a fresh install does.
A bench that changes a memory setting passes it in `ledger_options` and says so in its table.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Stack:
    nats_url: str
    database_url: str
    consolidator: bool
    semantic: bool = False
    """The ledger runs the semantic channel (its vectors are waited for)."""


@contextlib.contextmanager
def postgres() -> Iterator[str]:
    from tavern_runtime.embedded import EmbeddedPostgres

    root = Path(tempfile.mkdtemp(prefix="tavern-memory-pg-"))
    server = EmbeddedPostgres(root)
    server.start()
    try:
        yield server.dsn
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


async def _extensions(dsn: str) -> None:
    """What `tavern up` creates as the administrator before the services migrate."""
    from tavern_ledger import app as ledger_app
    from tavern_runtime.dbroles import ensure_extensions

    await ensure_extensions(dsn, {"ledger": ledger_app.EXTENSIONS})


@contextlib.asynccontextmanager
async def memory_stack(
    *, consolidator: bool = True, ledger_options: Mapping[str, Any] | None = None
) -> AsyncIterator[Stack]:
    """Fresh servers with the ledger (and, unless told not to, the consolidator) in process."""
    from bench.ledger import _ledger, _nats_server
    from tavern_ledger.config import LedgerSettings

    options = dict(ledger_options or {})
    semantic = bool(options.get("ledger_semantic", LedgerSettings().ledger_semantic))
    with postgres() as dsn, _nats_server() as url:
        await _extensions(dsn)
        await _provision(url)
        async with _ledger(url, dsn, **options):
            if not consolidator:
                yield Stack(url, dsn, consolidator=False, semantic=semantic)
                return
            async with _consolidator(url, dsn):
                yield Stack(url, dsn, consolidator=True, semantic=semantic)


async def _provision(nats_url: str) -> None:
    import nats

    from tavern_consolidator import app as consolidator_app
    from tavern_ledger import app as ledger_app
    from tavern_runtime.provision import provision

    nc = await nats.connect(nats_url)
    try:
        consumers = (*ledger_app.CONSUMERS, *consolidator_app.CONSUMERS)
        await provision(nc.jetstream(), consumers=consumers)
    finally:
        await nc.close()


@contextlib.asynccontextmanager
async def _consolidator(nats_url: str, database_url: str) -> AsyncIterator[None]:
    """The consolidator's app with its default settings and no model, until exit."""
    from bench.ledger import BENCH_KEY
    from tavern_consolidator import app as consolidator_app
    from tavern_consolidator.config import ConsolidatorSettings
    from tavern_llm import LLMConfig
    from tavern_runtime.health import health_file
    from tavern_runtime.service import serve

    data_dir = Path(tempfile.mkdtemp(prefix="tavern-memory-consolidator-"))
    settings = ConsolidatorSettings(
        nats_url=nats_url,
        database_url=database_url,
        data_dir=data_dir,
        health_port=0,
        log_level="WARNING",
        log_format="json",
        auth_key=BENCH_KEY,  # the ledger's: its calls are signed and checked as shipped
    )
    app = consolidator_app.build_app(settings, LLMConfig(base_url=""))
    stop = asyncio.Event()
    task = asyncio.create_task(serve("consolidator", app, settings, stop=stop))
    record = health_file(settings.data_dir, "consolidator")
    deadline = time.monotonic() + 60
    try:
        while not record.exists():
            if task.done():
                raise RuntimeError(f"the consolidator stopped while starting: {task.result()}")
            if time.monotonic() > deadline:
                raise TimeoutError("the consolidator did not start")
            await asyncio.sleep(0.1)
        yield
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.shield(task), 60)
        shutil.rmtree(data_dir, ignore_errors=True)


async def caught_up(nc: Any, stack: Stack, timeout: float = 600) -> None:
    """Wait until the ledger's ingestion reached the end of SESSIONS and, with the consolidator,
    until its consumers have nothing pending or unacknowledged."""
    import asyncpg

    js = nc.jetstream()
    last = (await js.stream_info("SESSIONS")).state.last_seq
    deadline = time.monotonic() + timeout
    db = await asyncpg.connect(stack.database_url)
    try:
        while True:
            found = await db.fetchval(
                "SELECT stream_seq FROM ledger.ingest_checkpoint WHERE consumer = 'ledger-ingest'"
            )
            if found is not None and found >= last and not await _unembedded(db, stack):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"ingestion stopped at {found} of {last}")
            await asyncio.sleep(0.05)
    finally:
        await db.close()
    if not stack.consolidator:
        return
    while not await _consolidator_idle(js):
        if time.monotonic() > deadline:
            raise TimeoutError("the consolidator's consumers did not catch up")
        await asyncio.sleep(0.2)


async def _unembedded(db: Any, stack: Stack) -> int:
    """Rows recall may read that have no vector yet (0 without the semantic channel)."""
    from tavern_ledger.embedding import MODEL
    from tavern_ledger.vectors import store as vector_store

    if not stack.semantic:
        return 0
    if not await db.fetchval("SELECT to_regclass('ledger.evidence_vector') IS NOT NULL"):
        return 0
    return await vector_store.missing_count(db, MODEL)


async def _consolidator_idle(js: Any) -> bool:
    for stream, durable in (
        ("LEDGER", "consolidator-ledger"),
        ("SESSIONS", "consolidator-sessions"),
    ):
        info = await js.consumer_info(stream, durable)
        if info.num_pending or info.num_ack_pending:
            return False
    return True


async def observations(stack: Stack) -> int:
    """Observations the consolidator distilled so far (every scope, any state)."""
    import asyncpg

    db = await asyncpg.connect(stack.database_url)
    try:
        return int(await db.fetchval("SELECT count(*) FROM ledger.observation"))
    finally:
        await db.close()


async def superseded_sources(stack: Stack) -> set[str]:
    """The source events of every superseded evidence row (what corrections replaced)."""
    import asyncpg

    db = await asyncpg.connect(stack.database_url)
    try:
        rows = await db.fetch(
            "SELECT DISTINCT source_event_id FROM ledger.evidence "
            "WHERE state = 'superseded' AND source_event_id IS NOT NULL"
        )
    finally:
        await db.close()
    return {r["source_event_id"] for r in rows}


async def rpc(nc: Any, op: str, body: Mapping[str, Any], timeout: float = 15) -> dict[str, Any]:
    """`tavern.rpc.ledger.<op>`; an error reply raises (a harness error, not a low score)."""
    from tavern_events import subjects

    reply = await nc.request(subjects.rpc("ledger", op), json.dumps(body).encode(), timeout)
    found: dict[str, Any] = json.loads(reply.data)
    if "error" in found:
        raise RuntimeError(f"ledger {op} failed: {found['error']}")
    return found
