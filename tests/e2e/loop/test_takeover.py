"""Two loop replicas as processes: SIGKILL the one running a turn, the other closes it as
interrupted once the lease expires, and answers the next input."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest
from nats.js import JetStreamContext

from tavern_loop.dispatch import DURABLE, dispatch_consumer
from tavern_loop.lease import lease_key
from tavern_runtime.provision import LEASES, BucketSpec, provision
from tests.integration.loop.checks import check_log, claims, in_turn, of_type, one, user_texts
from tests.integration.loop.conftest import LoopBus
from tests.support import TEST_AUTH_KEY, eventually, signed_nats

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

ROOT = Path(__file__).resolve().parents[3]
LEASE_TTL_S = 2.0


@asynccontextmanager
async def replica(nats_url: str, data_dir: Path) -> AsyncIterator[asyncio.subprocess.Process]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAVERN_")}
    env.update(
        TAVERN_NATS_URL=nats_url,
        TAVERN_AUTH_KEY=TEST_AUTH_KEY,  # a service without its key refuses to start
        TAVERN_DATA_DIR=str(data_dir),
        TAVERN_TEST_LEASE_TTL_S=str(LEASE_TTL_S),
        TAVERN_LOG_LEVEL="INFO",
        TAVERN_SHUTDOWN_GRACE_S="3",
        PYTHONPATH=str(ROOT),
    )
    await asyncio.to_thread(data_dir.mkdir, parents=True)
    with (data_dir / "replica.log").open("ab") as out:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.e2e.loop.replica",
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=out,
        )
    try:
        yield process
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), 10)
            except TimeoutError:
                process.kill()
                await process.wait()


async def pull_waiters(js: JetStreamContext) -> int:
    return int((await js.consumer_info("INPUTS", DURABLE)).num_waiting or 0)


async def test_a_killed_holder_turn_is_closed_as_interrupted_by_the_other_replica(
    nats_url: str, tmp_path: Path
) -> None:
    nc = await signed_nats(nats_url)  # inputs carry the operator, as the CLI sends them
    js = nc.jetstream()
    leases = BucketSpec(LEASES.name, ttl_s=LEASE_TTL_S, description=LEASES.description)
    await provision(js, consumers=[dispatch_consumer()], buckets=[leases])
    bus = LoopBus(nc, js, nats_url, tmp_path / "unused")
    try:
        async with (
            replica(nats_url, tmp_path / "a") as first,
            replica(nats_url, tmp_path / "b") as second,
        ):
            await eventually(lambda: _at_least(js, 2), timeout=30)
            await bus.say("s1", 'call slow with {} call echo with {"text": "never"}')
            await bus.logged("s1", "tool/call")
            kv = await js.key_value(LEASES.name)
            holder = (await kv.get(lease_key("s1"))).value or b""
            victim = first if holder.split(b"-")[-2] == str(first.pid).encode() else second
            survivor = second if victim is first else first
            assert str(victim.pid).encode() in holder
            victim.send_signal(signal.SIGKILL)
            await victim.wait()
            killed_at = datetime.now(UTC)
            started = time.monotonic()
            await eventually(lambda: _exactly(js, 1), timeout=10)  # only the survivor pulls

            next_id = await bus.say("s1", "still there")
            events = await bus.turns_ended("s1", 2, timeout=30)
            assert survivor.returncode is None
    finally:
        await nc.close()

    check_log(events)
    turn_one = in_turn(events, 1)
    results = [e for e in turn_one if e.type == "tool/result"]
    assert [(r.payload.name, r.payload.synthetic, r.payload.error.code) for r in results] == [
        ("slow", True, "TOOL_OUTCOME_UNKNOWN"),
        ("echo", True, "TOOL_NOT_STARTED"),
    ]
    assert [e.payload.name for e in of_type(turn_one, "tool/call")] == ["slow"]
    assert of_type(turn_one, "step/end")[-1].payload.finish_reason == "error"
    end = turn_one[-1]
    assert (end.type, end.payload.outcome, end.payload.reason) == (
        "turn/end",
        "failed",
        "interrupted",
    )
    assert end.payload.error.code == "interrupted"
    repaired_at = results[0].ts
    assert (repaired_at - killed_at).total_seconds() >= LEASE_TTL_S / 2, "the lease was respected"
    assert time.monotonic() - started < 20

    turn_two = in_turn(events, 2)
    assert [c[0] for c in claims(turn_two)] == [next_id]
    assert turn_two[-1].payload.outcome == "completed"
    assert user_texts(turn_two) == ["still there"]
    answer = of_type(turn_two, "assistant/message")[-1]
    assert answer.payload.content.startswith('You said: "still there"')
    assert one(turn_two, "turn/start").turn == 2


async def _at_least(js: JetStreamContext, count: int) -> bool:
    return await pull_waiters(js) >= count


async def _exactly(js: JetStreamContext, count: int) -> bool:
    return await pull_waiters(js) == count
