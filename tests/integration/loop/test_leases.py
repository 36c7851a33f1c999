"""Session leases while turns run: renewed within the bucket's TTL, released when idle."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from nats.js.errors import KeyNotFoundError

from tavern_loop.lease import lease_key
from tavern_loop.options import LoopOptions
from tavern_runtime.provision import LEASES
from tests.integration.loop.conftest import provisioned_bus
from tests.integration.loop.tools import ToolBench
from tests.support import eventually

pytestmark = pytest.mark.integration


async def test_a_lease_outlives_a_bucket_ttl_shorter_than_the_configured_one(
    nats_url: str, tmp_path: Path
) -> None:
    async with provisioned_bus(nats_url, tmp_path / "data", lease_ttl_s=1.5) as bus:
        bench = ToolBench()
        engine = await bus.engine(options=LoopOptions(lease_ttl_s=10), tools=bench.tools())
        kv = await bus.js.key_value(LEASES.name)
        await bus.say("s1", "call gate with {}")
        await asyncio.wait_for(bench.gate_entered.wait(), 10)
        first = await kv.get(lease_key("s1"))

        async def renewed_past_the_ttl() -> bool:
            try:
                entry = await kv.get(lease_key("s1"))
            except KeyNotFoundError as exc:
                raise AssertionError("the lease expired while its turn ran") from exc
            assert entry.value == engine.holder.encode()
            return (entry.revision or 0) >= (first.revision or 0) + 4

        await eventually(renewed_past_the_ttl, timeout=6, interval=0.1)
        bench.gate.set()
        events = await bus.turns_ended("s1", 1)
        assert events[-1].payload.outcome == "completed"

        async def released() -> bool:
            try:
                await kv.get(lease_key("s1"))
            except KeyNotFoundError:
                return True
            return False

        await eventually(released, timeout=5)
