"""One model request: stream deltas into `assistant/chunk` events, stop at once on cancel;
failed attempts announced by the provider go to `on_failed`, a failure after output ends the
stream with what was delivered so far.

Chunks are coalesced: deltas gather into one event, the first `first_s` after the stream's
first delta, each later one at least `interval_s` after the one before, so a stream costs a few
appends a second rather than one per token (each is a stored, fsynced message), and a stream
that ends within `first_s` costs no append of its own. A chunk is staged, written behind at
once: neither the stream nor its end waits for the write (a later flush does, before anything
outside depends on the log).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from typing import Any

from tavern_events.message import AssistantChunk, AssistantChunkPayload
from tavern_events.parts import ToolCallDelta as DeltaPart
from tavern_llm.base import AttemptFailed, FinalMessage, ProviderError, StreamDelta, StreamItem
from tavern_loop.domain.drafts import Drafter

Stage = Callable[[AssistantChunk], object]
OnFailed = Callable[[AttemptFailed], object]


@dataclass
class StreamOutcome:
    final: FinalMessage | None
    text: str  # what was streamed, kept when the stream is cancelled or cut
    reasoning: str
    cancelled: bool = False
    error: ProviderError | None = None
    """The failure that ended the stream after output (then `final` is None)."""


CHUNK_FIRST_S = 0.05
"""How long after its first delta a stream's first chunk is written (what a reader waits for
the first words, beyond the model)."""
CHUNK_INTERVAL_S = 0.2
"""The least time between two chunk appends of one stream: five live updates a second."""


@dataclass
class _ChunkWriter:
    """Stages deltas as a chunk once a stream has run for `first_s`, then at most one chunk
    every `interval_s` (each written behind at once, live for readers); a faster stream's
    deltas are staged with the final message instead (one append, not several)."""

    stage: Stage
    draft: Drafter
    attempt: int
    enabled: bool
    first_s: float = CHUNK_FIRST_S
    interval_s: float = CHUNK_INTERVAL_S
    index: int = 0
    last_at: float | None = None
    """When the last live chunk was staged (the event loop's clock)."""
    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: list[DeltaPart] = field(default_factory=list)
    inflight: asyncio.Task[None] | None = None
    """Waiting for the next chunk's time."""

    def add(self, delta: StreamDelta) -> None:
        if not self.enabled:
            return
        self.text.append(delta.text)
        self.reasoning.append(delta.reasoning)
        self.calls.extend(
            DeltaPart(index=c.index, id=c.id, name=c.name, arguments=c.arguments_delta)
            for c in delta.tool_calls
        )
        if self.inflight is None or self.inflight.done():
            self.inflight = asyncio.create_task(self._flush_later())

    async def _flush_later(self) -> None:
        await asyncio.sleep(self._wait())
        self.last_at = asyncio.get_running_loop().time()
        self.stage(self._take())

    def _wait(self) -> float:
        if self.last_at is None:
            return self.first_s
        return max(0.0, self.last_at + self.interval_s - asyncio.get_running_loop().time())

    def _take(self) -> AssistantChunk:
        payload = AssistantChunkPayload(
            index=self.index,
            attempt=self.attempt,
            delta="".join(self.text),
            reasoning_delta="".join(self.reasoning),
            tool_calls=tuple(self.calls),
        )
        self.text, self.reasoning, self.calls = [], [], []
        self.index += 1
        return self.draft(AssistantChunk, payload, source="host")

    async def close(self) -> None:
        """Stage whatever is left (it lands with the final message); nothing to wait for."""
        task, self.inflight = self.inflight, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.text or self.calls:
            self.stage(self._take())


async def stream_reply(
    source: AsyncGenerator[StreamItem, None],
    cancel: asyncio.Event,
    writer: _ChunkWriter,
    on_failed: OnFailed = lambda failed: None,
) -> StreamOutcome:
    """Consume `source` until its final message or until `cancel` is set (closing it).

    A `ProviderError` raised before any output propagates; one raised after output ends the
    stream with the text delivered so far (`outcome.error`)."""
    text: list[str] = []
    reasoning: list[str] = []
    cancelled: asyncio.Future[Any] = asyncio.ensure_future(cancel.wait())  # one for the stream
    try:
        while True:
            try:
                item = await _next_or_cancel(source, cancel, cancelled)
            except ProviderError as error:
                if not error.after_output:
                    raise
                return StreamOutcome(None, "".join(text), "".join(reasoning), error=error)
            if item is None:
                return StreamOutcome(None, "".join(text), "".join(reasoning), cancelled=True)
            if isinstance(item, FinalMessage):
                return StreamOutcome(item, item.content, item.reasoning_content)
            if isinstance(item, AttemptFailed):
                on_failed(item)
                continue
            text.append(item.text)
            reasoning.append(item.reasoning)
            writer.add(item)
    finally:
        cancelled.cancel()
        with contextlib.suppress(Exception):
            await source.aclose()
        await writer.close()


async def _next_or_cancel(
    source: AsyncGenerator[StreamItem, None],
    cancel: asyncio.Event,
    cancelled: asyncio.Future[Any],
) -> StreamItem | None:
    if cancel.is_set():
        return None
    step: asyncio.Future[Any] = asyncio.ensure_future(source.__anext__())
    done, _ = await asyncio.wait({step, cancelled}, return_when=asyncio.FIRST_COMPLETED)
    if step in done:
        try:
            item: StreamItem = step.result()
            return item
        except StopAsyncIteration as exc:
            raise RuntimeError("the provider stream ended without a final message") from exc
    step.cancel()  # closes the provider's HTTP stream from inside its generator
    with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration, Exception):
        await step
    return None


def chunk_writer(
    stage: Stage,
    draft: Drafter,
    attempt: int,
    enabled: bool,
    interval_s: float = CHUNK_INTERVAL_S,
) -> _ChunkWriter:
    return _ChunkWriter(stage, draft, attempt, enabled, interval_s=interval_s)
