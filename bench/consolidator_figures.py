"""The consolidator's figures: rule-fallback distillation (evidence/s, through the real ledger's
`observation.propose`, one request per observation) and the per-batch overhead around an
instant model call (prompt, parse, audit rows, proposals, watermark), each beside the raw
request/reply baseline on the same nats-server kind.

Both run the distillation use case in process against the ledger app served in process, a
database of their own on the run's embedded PostgreSQL, and evidence copies seeded directly.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import nats

from bench.ledger import BENCH_KEY, _ledger
from bench.projector_figures import _fresh_database
from bench.registry import Env, Result, figure
from tavern_consolidator import app as consolidator_app
from tavern_consolidator.distillation import Distillation, Retry
from tavern_consolidator.domain.distil import Attempt
from tavern_consolidator.domain.throttle import Thresholds
from tavern_consolidator.ledger_client import LedgerClient
from tavern_consolidator.model import Model
from tavern_ledger import app as ledger_app
from tavern_llm import LLMConfig, build_router
from tavern_runtime.auth import Credentials
from tavern_runtime.migrations import migrate
from tavern_runtime.principals import service
from tests.integration.consolidator.model_server import ModelServer, reply

SCOPE = "bench-chat"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass
class TimedModel:
    """A model that also records how long each attempt took (the model's own share)."""

    model: Model
    spent_s: list[float] = field(default_factory=list)

    @property
    def configured(self) -> bool:
        return self.model.configured

    async def attempt(self, messages: list[dict[str, str]], batch_ids: Sequence[str]) -> Attempt:
        started = time.perf_counter()
        try:
            return await self.model.attempt(messages, batch_ids)
        finally:
            self.spent_s.append(time.perf_counter() - started)


@asynccontextmanager
async def _stack(nats_url: str) -> AsyncIterator[tuple[Any, Any]]:
    """A fresh database with both schemas, the ledger answering, a pool and a client."""
    dsn = await _fresh_database()
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=4)
    await migrate(pool, ledger_app.migrations())
    await migrate(pool, consolidator_app.migrations())
    nc = await nats.connect(nats_url)
    try:
        async with _ledger(nats_url, dsn):
            yield pool, nc
    finally:
        await nc.close()
        await pool.close()


async def _seed(pool: Any, n: int) -> None:
    rows = [
        (f"ev_bench_{i:014d}", SCOPE, f"s{i % 20}", i + 1, f"I keep note {i} on how I brew tea",
         "user_explicit", "user_fact", "active", True, T0 + timedelta(seconds=i))
        for i in range(n)
    ]  # fmt: skip
    await pool.executemany(
        "INSERT INTO consolidator.evidence (id, scope_id, session_id, seq, text, authority, "
        "claim_domain, state, digestible, observed_at) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10)",
        rows,
    )


def _distillation(pool: Any, nc: Any, model: Any, batch: int) -> Distillation:
    thresholds = Thresholds(min_evidence=1, min_turns=1, max_batch=batch, daily_runs=10**6)
    credentials = Credentials(BENCH_KEY.encode())
    client = LedgerClient(lambda: nc, headers=lambda: credentials.headers(service("consolidator")))
    return Distillation(lambda: pool, lambda: model, client, thresholds, Retry(), utc_now)


async def _drain(d: Distillation, pool: Any) -> tuple[int, list[float]]:
    """Run forced batches until nothing is left; (evidence digested, seconds per batch). The
    ledger must have stored every observation the batches say they wrote, and some at all: a
    refused proposal (no principal, say) would make the figure a measure of refusals."""
    digested, written, per_batch = 0, 0, list[float]()
    while True:
        started = time.perf_counter()
        result = await d.run(SCOPE, force=True)
        if not result.get("digested"):
            break
        per_batch.append(time.perf_counter() - started)
        digested += int(result["digested"])
        written += int(result["observations"])
    stored = await pool.fetchval("SELECT count(*) FROM ledger.observation")
    if written == 0 or stored != written:
        raise RuntimeError(f"the ledger stored {stored} observations; the batches wrote {written}")
    return digested, per_batch


@figure(
    "consolidator_fallback_distil",
    baseline="request_reply",
    servers=("default",),
    count=2000,
    description="rule-fallback distillation, 40-evidence batches, one observation.propose each",
)
async def consolidator_fallback_distil(env: Env, n: int) -> Result:
    async with _stack(env.nats_url) as (pool, nc):
        await _seed(pool, n)
        model = Model(build_router(LLMConfig(base_url="")), 1024, 30)
        started = time.perf_counter()
        digested, _ = await _drain(_distillation(pool, nc, model, 40), pool)
        elapsed = time.perf_counter() - started
    if digested != n:
        raise RuntimeError(f"digested {digested} of {n}")
    return Result(n, elapsed)


def _three(records: list[dict[str, Any]]) -> Any:
    ids = [r["id"] for r in records]
    return reply(
        [{"subject": f"k{n}", "predicate": "prefers", "claimDomain": "user_preference",
          "text": f"conclusion {n} of {ids[0]}", "evidenceIds": ids[n::3]} for n in range(3)]
    )  # fmt: skip


@figure(
    "consolidator_batch_overhead",
    baseline="request_reply",
    servers=("default",),
    count=200,
    description="batches of 10 evidence with an instant loopback model (3 observations each); "
    "latency = batch time minus the model call",
)
async def consolidator_batch_overhead(env: Env, n: int) -> Result:
    async with _stack(env.nats_url) as (pool, nc), ModelServer(_three) as server:
        await _seed(pool, n * 10)
        config = LLMConfig(base_url=server.base_url, api_key="bench", max_retries=0)
        timed = TimedModel(Model(build_router(config), 1024, 30))
        _, per_batch = await _drain(_distillation(pool, nc, timed, 10), pool)
    overhead = [(b - m) * 1000 for b, m in zip(per_batch, timed.spent_s, strict=True)]
    return Result(len(per_batch), sum(overhead) / 1000, tuple(overhead))
