"""How a streamed reply becomes `assistant/chunk` events: the first soon after the first delta,
later ones at most one an interval, the rest staged with the final message. Every chunk is
staged (written behind): neither the stream nor its end waits for a write."""

from __future__ import annotations

import asyncio
import itertools
from datetime import UTC, datetime
from typing import Any

import pytest

from tavern_events.ids import new_id
from tavern_events.message import AssistantChunk, AssistantChunkPayload
from tavern_llm.base import StreamDelta
from tavern_loop.config import LoopSettings, loop_options
from tavern_loop.domain.drafts import Drafter
from tavern_loop.streaming import CHUNK_INTERVAL_S, chunk_writer


class Log:
    """Chunks staged while the stream runs (`appended`, live) and when it closes (`staged`)."""

    def __init__(self) -> None:
        self.appended: list[tuple[float, AssistantChunkPayload]] = []
        self.staged: list[AssistantChunkPayload] = []
        self.closing = False

    def stage(self, chunk: AssistantChunk) -> None:
        if self.closing:
            self.staged.append(chunk.payload)
        else:
            self.appended.append((asyncio.get_running_loop().time(), chunk.payload))


def draft() -> Drafter:
    return Drafter(session_id="s-chunks", clock=lambda: datetime.now(UTC), new_id=new_id)


async def stream(log: Log, words: int, every_s: float, **kw: Any) -> float:
    writer = chunk_writer(log.stage, draft(), 1, True, **kw)
    started = asyncio.get_running_loop().time()
    for n in range(words):
        writer.add(StreamDelta(text=f"w{n} "))
        await asyncio.sleep(every_s)
    log.closing = True
    await writer.close()
    return started


def text(log: Log) -> str:
    return "".join(p.delta for _, p in log.appended) + "".join(p.delta for p in log.staged)


async def test_a_long_stream_is_written_a_few_times_a_second_not_once_a_token() -> None:
    log = Log()
    started = await stream(log, 100, 0.01)  # one second of tokens at 100 a second
    took = asyncio.get_running_loop().time() - started  # longer on a busy machine
    assert 4 <= len(log.appended) <= took / CHUNK_INTERVAL_S + 2
    assert text(log) == "".join(f"w{n} " for n in range(100))  # nothing lost or doubled
    gaps = [b - a for (a, _), (b, _) in itertools.pairwise(log.appended)]
    assert min(gaps) >= CHUNK_INTERVAL_S * 0.9
    assert [p.index for _, p in log.appended] + [p.index for p in log.staged] == list(
        range(len(log.appended) + len(log.staged))
    )


async def test_the_first_chunk_comes_soon_after_the_first_delta() -> None:
    log = Log()
    started = await stream(log, 30, 0.01)
    assert log.appended
    first_at = log.appended[0][0]
    assert first_at - started < CHUNK_INTERVAL_S  # the first does not wait an interval


async def test_a_stream_over_within_the_first_wait_costs_no_append_of_its_own() -> None:
    log = Log()
    await stream(log, 5, 0.0)
    assert log.appended == []
    assert len(log.staged) == 1
    assert log.staged[0].delta == "w0 w1 w2 w3 w4 "


async def test_the_interval_is_a_setting() -> None:
    fast, slow = Log(), Log()
    await stream(fast, 60, 0.01, interval_s=0.05)
    await stream(slow, 60, 0.01, interval_s=0.3)
    assert len(fast.appended) > 2 * len(slow.appended)
    assert text(fast) == text(slow)


async def test_closing_does_not_wait_out_the_interval() -> None:
    log = Log()
    writer = chunk_writer(log.stage, draft(), 1, True)
    loop = asyncio.get_running_loop()
    for n in range(20):
        writer.add(StreamDelta(text=f"w{n} "))
        await asyncio.sleep(0.005)
    began = loop.time()
    log.closing = True
    await writer.close()
    assert loop.time() - began < CHUNK_INTERVAL_S / 2
    assert text(log) == "".join(f"w{n} " for n in range(20))


def test_the_interval_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TAVERN_LOOP_CHUNK_INTERVAL_S", raising=False)
    assert loop_options(LoopSettings()).chunk_interval_s == CHUNK_INTERVAL_S
    monkeypatch.setenv("TAVERN_LOOP_CHUNK_INTERVAL_S", "0.5")
    assert loop_options(LoopSettings()).chunk_interval_s == 0.5
