"""One session's log as the runner holds it: the events so far, their fold, and appends.

Events are staged (numbered, folded, visible to `derive_messages`) and written behind: a
staged event starts its way to the stream at once, in order, while the turn goes on (the
loop's own work overlaps the server's fsyncs); the events staged meanwhile go together in the
next append, pipelined while the holder's lease is fresh (docs/contract.md, "Pipelined
appends"). `flush` waits until everything staged is
durable; the turn flushes before anything outside depends on its log: a tool execution, a
claim another log refers to, the end of a turn. A model request is not such a point: the
request goes out while its `agent/request` is being written, and the reply is staged after
it. A crash loses only events not yet durable, which no one outside has relied on, or leaves
a durable prefix of them, which is a well-formed log that crash repair closes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence

from tavern_events.context import ContextCompactionSkipped
from tavern_events.envelope import SessionEvent
from tavern_events.step import StepStarted
from tavern_events.turn import TurnEnded, TurnStarted
from tavern_events.union import encode
from tavern_loop.domain.history import Message, Surface
from tavern_loop.domain.state import SessionState, fold
from tavern_runtime.errors import TransientError
from tavern_runtime.logs import get_logger
from tavern_runtime.sessionlog import SessionLogWriter

log = get_logger(__name__)

APPEND_ATTEMPTS = 9
"""With backoff 0.05 s doubling to 2 s: about 9 s, longer than a stream leader election."""


class HeldLog:
    """Appends are serialised and conditional on the last durable seq this holder has seen.

    A `ConcurrencyConflict` from the writer means another writer moved the log: the caller
    must stop (its lease is gone). An unknown outcome is retried with the same events, which
    the writer recognises if they already landed. A failure of the write-behind is raised by
    the next `flush` (which retries, as before, if it is called again).
    """

    def __init__(
        self,
        session_id: str,
        writer: SessionLogWriter,
        events: list[SessionEvent],
        *,
        write_behind: bool = True,
        may_pipeline: Callable[[], bool] | None = None,
    ):
        self.session_id = session_id
        self.events = events
        self.state: SessionState = fold(session_id, events)
        self.surface = Surface()
        for event in events:
            self.surface.apply(event)
        self.durable_seq = self.state.last_seq
        self.durable_cursor = self.state.input_cursor
        self.settled_cursor = settled_cursor(events)
        self._writer = writer
        self._staged: list[SessionEvent] = []
        self._payloads: list[bytes] = []
        """The staged events encoded, by the turn while the writer waits for the stream."""
        self._lock = asyncio.Lock()
        self._write_behind = write_behind
        self._may_pipeline = may_pipeline
        """Asked before each append: may several events go pipelined now (the holder's lease
        is fresh enough; `SessionLogWriter.append`)? None: always."""
        self._behind: asyncio.Task[None] | None = None
        self._failure: Exception | None = None

    def stage(self, *events: SessionEvent) -> list[SessionEvent]:
        """Number and fold `events` now; they reach the stream with the next flush."""
        numbered = []
        for event in events:
            event = event.model_copy(update={"seq": self.state.last_seq + 1})
            self.events.append(event)
            self.state.apply(event)
            self.surface.apply(event)
            numbered.append(event)
        self._staged.extend(numbered)
        self._payloads.extend(encode(event) for event in numbered)
        self._start_writing()
        return numbered

    def messages(self) -> list[Message]:
        """`derive_messages(self.events)`, kept up to date as events are staged."""
        return self.surface.messages()

    async def flush(self) -> None:
        """Everything staged is durable on return; raises what the write-behind ran into."""
        async with self._lock:
            failure, self._failure = self._failure, None
            if failure is not None:
                raise failure
            await self._write_staged()

    @property
    def failure(self) -> Exception | None:
        """What the write-behind ran into, until a flush raises it."""
        return self._failure

    async def close(self) -> None:
        """Stop writing behind (the holder lets the session go); what is staged stays staged."""
        task, self._behind = self._behind, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _start_writing(self) -> None:
        if not self._write_behind or self._failure is not None:
            return
        if self._lock.locked() or (self._behind is not None and not self._behind.done()):
            return  # the running writer (or flush) takes the new events before it finishes
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # staged outside a loop: the next flush writes them
        self._behind = loop.create_task(self._write_behind_staged())

    async def _write_behind_staged(self) -> None:
        async with self._lock:
            if self._failure is not None:
                return
            try:
                await self._write_staged()
            except Exception as exc:  # the next flush raises it where the turn can act on it
                self._failure = exc

    async def _write_staged(self) -> None:
        while self._staged:
            pipelines = self._pipelines()  # a whole batch is one round trip, however long
            for part in _parts(list(self._staged), 2 if pipelines else self._writer.batch_min):
                await self._append(part, self._payloads[: len(part)], pipelines)
                del self._staged[: len(part)]
                del self._payloads[: len(part)]
                self._settled(part)

    async def append(self, *events: SessionEvent) -> Sequence[SessionEvent]:
        """Stage and flush at once (with anything staged before)."""
        numbered = self.stage(*events)
        await self.flush()
        return numbered

    async def start_other(self, event: SessionEvent) -> None:
        """Begin another session's log with `event` (a fork's child), only while that log is
        empty: `ConcurrencyConflict` if it is not (a retry of the same event is a no-op)."""
        await self._writer.append(event.session_id, [event], expected_last=0)

    def _settled(self, batch: list[SessionEvent]) -> None:
        self.durable_seq = batch[-1].seq
        for event in batch:
            if isinstance(event, TurnStarted | StepStarted | ContextCompactionSkipped):
                for claim in event.payload.claimed:
                    self.durable_cursor = max(self.durable_cursor, claim.stream_seq)
            elif isinstance(event, TurnEnded):
                self.settled_cursor = self.durable_cursor

    def _pipelines(self) -> bool:
        if not self._writer.pipelines:
            return False
        return self._may_pipeline is None or self._may_pipeline()

    async def _append(
        self, events: Sequence[SessionEvent], payloads: Sequence[bytes], pipelined: bool
    ) -> None:
        delay = 0.05
        for attempt in range(1, APPEND_ATTEMPTS + 1):
            try:
                await self._writer.append(
                    self.session_id,
                    events,
                    expected_last=events[0].seq - 1,
                    payloads=payloads,
                    pipelined=pipelined and self._pipelines(),  # a retry asks again
                )
                return
            except TransientError:
                if attempt == APPEND_ATTEMPTS:
                    raise
                log.warning("append_retry", session_id=self.session_id, attempt=attempt)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)


def settled_cursor(events: Sequence[SessionEvent]) -> int:
    """The INPUTS seq up to which every claimed input's turn has a durable turn/end."""
    cursor = settled = 0
    for event in events:
        if isinstance(event, TurnStarted | StepStarted | ContextCompactionSkipped):
            cursor = max([cursor, *(c.stream_seq for c in event.payload.claimed)])
        elif isinstance(event, TurnEnded):
            settled = cursor
    return settled


def _parts(batch: list[SessionEvent], batch_min: int) -> list[list[SessionEvent]]:
    """One atomic batch when that is cheaper, else one conditional append per event. Written
    behind, the events staged while an append is in flight go together in the next."""
    return [batch] if len(batch) >= batch_min else [[event] for event in batch]
