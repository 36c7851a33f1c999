"""Six parallel 100 MB JSON bodies to `/api/login`, unauthenticated, sent over TCP to the real
gateway served by uvicorn in this process: its resident memory stays bounded. Each is refused
before it is parsed (half declare their length, half are chunked); uvicorn reads what a client
still sends after the 413 and drops it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx

from tests.integration.gateway.conftest import served

MB = 1024 * 1024
BODY_MB = 100
SENDERS = 6


def _rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


class Sender:
    """A 100 MB JSON body, `{"name": "x", "password": "xxxx..."}`, made as it is sent."""

    def __init__(self) -> None:
        self.sent = 0
        self.chunk = b"x" * MB

    async def body(self) -> AsyncIterator[bytes]:
        yield b'{"name": "x", "password": "'
        for _ in range(BODY_MB):
            self.sent += len(self.chunk)
            yield self.chunk
        yield b'"}'


async def _send(base: str, sender: Sender, declared: bool) -> str | None:
    headers = {"Content-Type": "application/json"}
    if declared:
        headers["Content-Length"] = str(BODY_MB * MB + 29)
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        try:
            response = await client.post("/api/login", content=sender.body(), headers=headers)
        except httpx.TransportError:  # the gateway answered and closed before the body ended
            return None
        return f"{response.status_code} {response.json()['error']['code']}"


async def test_six_parallel_100_mb_bodies_leave_the_gateways_memory_bounded(
    tmp_path: Path, provisioned: str, database_url: str
) -> None:
    async with served(tmp_path, provisioned, database_url) as base:
        async with httpx.AsyncClient(base_url=base) as warm:  # load what a first request loads
            await warm.post("/api/login", json={"name": "x", "password": "y"})
        before = _rss_bytes()
        peak = before
        done = asyncio.Event()

        async def sample() -> None:
            nonlocal peak
            while not done.is_set():
                peak = max(peak, _rss_bytes())
                await asyncio.sleep(0.02)

        sampler = asyncio.create_task(sample())
        senders = [Sender() for _ in range(SENDERS)]
        answers = await asyncio.gather(
            *(_send(base, s, declared=i % 2 == 0) for i, s in enumerate(senders))
        )
        done.set()
        await sampler
        after = _rss_bytes()
    print(f"rss before {before // MB} MB, peak {peak // MB} MB, after {after // MB} MB")
    assert peak - before < 64 * MB, (before // MB, peak // MB, after // MB)
    assert after - before < 32 * MB, (before // MB, after // MB)
    assert answers == ["413 too_large"] * SENDERS, answers
