"""Fault behaviour: the consolidator killed with SIGKILL while the model answers and again
after the model answered but before the ledger took the output, then restarted, loses and
doubles nothing; it resumes from its watermark and its durable consumers."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import nats
import pytest

from tavern_runtime.errors import TavernError
from tests.integration.consolidator.conftest import Tavern, provisioned
from tests.integration.consolidator.model_server import ModelServer, reply
from tests.integration.ledger.conftest import ledger_settings
from tests.integration.services.conftest import running_service
from tests.support import eventually

pytestmark = pytest.mark.integration

PREFERENCES = [f"Preference number {i}: I like my tea strong and hot" for i in range(22)]


def three_keys(records: list[dict[str, Any]], delay_s: float = 0.0) -> Any:
    """Three observations with three keys, citing the batch's records."""
    ids = [r["id"] for r in records]
    return reply(
        [
            {"subject": f"topic-{n}", "predicate": "prefers", "claimDomain": "user_preference",
             "text": f"conclusion {n} of {len(ids)} records", "evidenceIds": ids[n::3]}
            for n in range(3)
        ],
        delay_s=delay_s,
    )  # fmt: skip


@contextlib.asynccontextmanager
async def consolidator_process(
    env: dict[str, str], log: Path
) -> AsyncIterator[asyncio.subprocess.Process]:
    """`python -m tavern_consolidator`, as a deployment runs it; SIGTERM on exit unless the test
    already killed it."""
    with log.open("ab") as out:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tavern_consolidator", env=env, stdout=out, stderr=out
        )
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(proc.wait(), 30)


async def kill_9(proc: asyncio.subprocess.Process) -> None:
    proc.kill()  # SIGKILL: no shutdown code runs
    await proc.wait()


def process_env(tmp_path: Path, nats_url: str, database_url: str, model_url: str) -> dict[str, str]:
    return {
        **os.environ,
        "TAVERN_NATS_URL": nats_url,
        "TAVERN_DATABASE_URL": database_url,
        "TAVERN_DATA_DIR": str(tmp_path / "consolidator"),
        "TAVERN_HEALTH_PORT": "0",
        "TAVERN_LOG_FORMAT": "json",
        "TAVERN_LOG_LEVEL": "INFO",
        "TAVERN_LLM_BASE_URL": model_url,
        "TAVERN_LLM_API_KEY": "test",
        "TAVERN_LLM_MODEL": "distil-test",
        "TAVERN_CONSOLIDATOR_CONSUMER_WAIT_S": "0.05",
        "TAVERN_CONSOLIDATOR_POLL_S": "0.2",
        "TAVERN_CONSOLIDATOR_RETRY_BASE_S": "0.2",
        "TAVERN_CONSOLIDATOR_RETRY_MAX_S": "0.5",
        "TAVERN_CONSOLIDATOR_JUDGE_CLAIMS": "false",  # the model here answers distillations only
    }


async def test_kill_9_mid_batch_and_restart_loses_and_doubles_nothing(
    tmp_path: Path, nats_url: str, database_url: str
) -> None:
    await provisioned(nats_url)
    ledger = ledger_settings(
        tmp_path / "ledger", nats_url, database_url, ledger_rpc_rate_per_s=1000.0
    )
    log = tmp_path / "consolidator.log"
    nc = await nats.connect(nats_url)
    db = await asyncpg.connect(database_url)
    async with ModelServer(lambda records: three_keys(records, delay_s=5.0)) as model:
        tavern = Tavern(nc, nc.jetstream(), db, model)
        env = process_env(tmp_path, nats_url, database_url, model.base_url)
        try:
            await _scenario(tavern, ledger, env, log)
        except (AssertionError, TavernError):
            print(log.read_text()[-6000:])
            raise
        finally:
            await db.close()
            await nc.close()


async def _scenario(tavern: Tavern, ledger: Any, env: dict[str, str], log: Path) -> None:
    # 1. Killed while the model is answering: nothing was proposed, the watermark stays.
    async with running_service("ledger", ledger):
        await tavern.session("s1")
        await tavern.say("s1", *PREFERENCES[:12])
        async with consolidator_process(env, log) as proc:
            await eventually(lambda: tavern.model.distil_requests, timeout=30)
            assert [b["status"] for b in await tavern.batches("s1")] == ["running"]
            await kill_9(proc)
    # 2. The model answers at once, but the ledger is away: killed with the output stored.
    tavern.model.responder = three_keys
    async with consolidator_process(env, log) as proc:
        await eventually(lambda: _stored_not_proposed(tavern), timeout=30)
        await kill_9(proc)
    assert await tavern.watermark("s1") == (None, "")
    # 3. Both back: the stored output is proposed (the model is not asked again) and the batch
    #    closes; new evidence continues from the watermark.
    async with running_service("ledger", ledger), consolidator_process(env, log):
        [first] = await tavern.ok_batches("s1", timeout=30)
        await tavern.say("s1", *PREFERENCES[12:])
        second = (await tavern.ok_batches("s1", 2, timeout=30))[-1]
        await tavern.settled()
    await _nothing_lost_or_doubled(tavern, first, second)


async def _stored_not_proposed(tavern: Tavern) -> bool:
    found = await tavern.batches("s1")
    return any(b["status"] == "distilled" and b["error"] for b in found)


async def _nothing_lost_or_doubled(
    tavern: Tavern, first: dict[str, Any], second: dict[str, Any]
) -> None:
    assert [b["status"] for b in await tavern.batches("s1")] == ["interrupted", "ok", "ok"]
    assert len(tavern.model.distil_requests) == 3  # killed call, stored answer, second batch
    assert first["size"] == 12
    assert second["size"] == 10
    assert second["batch_from"] == first["batch_to"]
    assert await tavern.copies("s1") == 22
    rows = await tavern.observations("s1", state=None)
    assert len(rows) == 6
    assert len({r["id"] for r in rows}) == 6
    assert sum(r["state"] == "active" for r in rows) == 3  # the second batch superseded the first
    upserts = await tavern.db.fetchval(
        "SELECT count(*) FROM ledger.audit WHERE op = 'observation-upsert'"
    )
    assert upserts == 6
    digested = set(first["evidence_ids"]) | set(second["evidence_ids"])
    all_ids = {r["id"] for r in await tavern.db.fetch("SELECT id FROM consolidator.evidence")}
    assert digested == all_ids
    assert await tavern.watermark("s1") == (second["batch_to"], second["last_id"])
