"""The tool pipeline: schedules a step's calls, runs them, and commits results in model order.

Parallel-safe calls share a rolling pool; an exclusive call runs alone. Every callback runs in
the scheduling coroutine, one at a time, so the runner's log appends never interleave.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from tavern_loop.domain.guard import RepeatGuard
from tavern_loop.tools.base import ToolContext, ToolError, ToolOutput, ToolRegistry, ToolSpec
from tavern_loop.tools.bounds import Bounded, ResultOrigin, SpillPolicy, bound_result
from tavern_loop.tools.execution import Authorise, CallExecutor, Executed, ToolCallRequest
from tavern_loop.tools.limits import ToolLimits, TurnBudget, result_limit

log = structlog.get_logger(__name__)

ABORTED_BEFORE_DISPATCH = "tool call aborted before dispatch"
ABORTED = "tool call aborted"

MakeContext = Callable[[ToolCallRequest], ToolContext]
OnStarted = Callable[[ToolCallRequest], Awaitable[None]]


@dataclass(frozen=True)
class ToolCallOutcome:
    """A committed result, ready to append as `tool/result`."""

    call_id: str
    name: str
    ok: bool
    content: str
    error: ToolError | None = None
    truncated: bool = False
    spill_locator: str | None = None
    duration_ms: int = 0
    synthetic: bool = False
    reminder: str | None = None
    """A repeat-tool reminder: append as `user/message` (plugin:repeat-tool-reminder) next step."""
    concludes_turn: bool = False
    data: dict[str, Any] | None = None
    spill_bytes: int | None = None


OnResult = Callable[[ToolCallOutcome], Awaitable[None]]


@dataclass
class _Started:
    call: ToolCallRequest
    ctx: ToolContext
    task: asyncio.Task[Executed]
    exclusive: bool
    started_at: float = field(default_factory=time.monotonic)


class ToolPipeline:
    def __init__(
        self,
        registry: ToolRegistry,
        limits: ToolLimits | None = None,
        guard: RepeatGuard | None = None,
        spill: SpillPolicy | None = None,
        authorise: Authorise | None = None,
    ) -> None:
        self.registry = registry
        self.limits = limits or ToolLimits()
        self.guard = guard
        self.spill = spill
        self.executor = CallExecutor(registry, self.limits, authorise)

    def parallel_safe(self, name: str) -> bool:
        """How a call is scheduled (and logged in `tool/call`); unknown tools are exclusive."""
        tool = self.registry.get(name)
        return tool is not None and tool.spec.parallel_safe

    async def run(
        self,
        calls: list[ToolCallRequest],
        make_context: MakeContext,
        on_started: OnStarted,
        on_result: OnResult,
        cancelled: asyncio.Event,
        budget: TurnBudget | None = None,
    ) -> list[ToolCallOutcome]:
        """Run one step's calls; `budget` carries the per-turn call count across steps."""
        run = _Run(self, make_context, on_started, on_result, cancelled, budget or TurnBudget())
        return await run.execute(calls)


class _Run:
    """The state of one `run()`: started calls in model order and the commit cursor."""

    def __init__(
        self,
        pipeline: ToolPipeline,
        make_context: MakeContext,
        on_started: OnStarted,
        on_result: OnResult,
        cancelled: asyncio.Event,
        budget: TurnBudget,
    ) -> None:
        self.p = pipeline
        self.make_context = make_context
        self.on_started = on_started
        self.on_result = on_result
        self.cancelled = cancelled
        self.budget = budget
        self.started: list[_Started] = []
        self.outcomes: list[ToolCallOutcome] = []
        self.cancel_wait: asyncio.Task[Any] | None = None

    async def execute(self, calls: list[ToolCallRequest]) -> list[ToolCallOutcome]:
        queue = deque(calls)
        self.cancel_wait = asyncio.create_task(self.cancelled.wait())
        try:
            await self._schedule(queue)
            await self._drain()
            for call in queue:
                await self._abort_before_dispatch(call)
        finally:
            self._cancel_leftovers()
        return self.outcomes

    async def _schedule(self, queue: deque[ToolCallRequest]) -> None:
        while queue and not self.cancelled.is_set():
            exclusive = not self.p.parallel_safe(queue[0].name)
            if self._can_start(exclusive):
                await self._start(queue.popleft(), exclusive)
            else:
                await self._wait_progress()
            await self._commit_ready()

    def _running(self) -> list[_Started]:
        return [s for s in self.started if not s.task.done()]

    def _can_start(self, exclusive: bool) -> bool:
        running = self._running()
        if exclusive or any(s.exclusive for s in running):
            return not running
        return len(running) < self.p.limits.max_parallel

    async def _start(self, call: ToolCallRequest, exclusive: bool) -> None:
        self.budget.calls_started += 1
        ordinal = self.budget.calls_started
        ctx = self.make_context(call)
        await self.on_started(call)
        task = asyncio.create_task(self.p.executor.run(call, ctx, ordinal))
        self.started.append(_Started(call, ctx, task, exclusive))

    async def _wait_progress(self) -> None:
        waiting: set[asyncio.Future[Any]] = {s.task for s in self._running()}
        if waiting and self.cancel_wait is not None:
            waiting.add(self.cancel_wait)
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)

    async def _commit_ready(self) -> None:
        while len(self.outcomes) < len(self.started):
            started = self.started[len(self.outcomes)]
            if not started.task.done():
                return
            await self._commit(started)

    async def _drain(self) -> None:
        """Commit every started call; after a cancel, abort those still running past the grace."""
        while len(self.outcomes) < len(self.started):
            if self.cancelled.is_set():
                await self._abort_running()
                for started in self.started[len(self.outcomes) :]:
                    await self._commit(started)
                return
            await self._wait_progress()
            await self._commit_ready()

    async def _abort_running(self) -> None:
        running = {s.task for s in self._running()}
        if not running:
            return
        _, pending = await asyncio.wait(running, timeout=self.p.limits.cancel_grace_s)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=self.p.limits.cancel_grace_s)

    async def _commit(self, started: _Started) -> None:
        outcome = await self._post_execute(started, _executed(started))
        await self.on_result(outcome)
        self.outcomes.append(outcome)

    async def _post_execute(self, started: _Started, executed: Executed) -> ToolCallOutcome:
        """Guard, then bound; both see every call that got this far, rejected ones included."""
        call, ctx, output = started.call, started.ctx, executed.output
        reminder = None
        if self.p.guard is not None:
            reminder = self.p.guard.observe(ctx.agent_id, call.name, call.arguments_raw)
        origin = ResultOrigin(ctx.session_id, call.name, call.call_id)
        limit = result_limit(_spec(self.p.registry, call.name), self.p.limits)
        bounded = await bound_result(output.content, origin, self.p.spill, limit)
        _log_executed(call, output, executed.duration_ms, bounded)
        return _outcome(call, output, executed.duration_ms, bounded, reminder)

    async def _abort_before_dispatch(self, call: ToolCallRequest) -> None:
        log.info("tool_aborted_before_dispatch", tool=call.name, call_id=call.call_id)
        await self.on_started(call)
        output = ToolOutput.failure("ABORTED_BEFORE_DISPATCH", ABORTED_BEFORE_DISPATCH)
        outcome = _outcome(call, output, 0, Bounded(output.content), None, synthetic=True)
        await self.on_result(outcome)
        self.outcomes.append(outcome)

    def _cancel_leftovers(self) -> None:
        if self.cancel_wait is not None:
            self.cancel_wait.cancel()
        for started in self._running():
            started.task.cancel()


def _executed(started: _Started) -> Executed:
    """The task's result; ABORTED for a body that was cancelled (or would not stop)."""
    task = started.task
    elapsed = round((time.monotonic() - started.started_at) * 1000)
    if not task.done() or task.cancelled():
        return Executed(ToolOutput.failure("ABORTED", ABORTED), elapsed)
    error = task.exception()
    if error is None:
        return task.result()
    # Tool bodies are caught in the executor; this is a failing authorise hook or a bug.
    log.error("tool_pipeline_failed", tool=started.call.name, exc_info=error)
    message = str(error) or type(error).__name__
    return Executed(ToolOutput.failure("TOOL_FAILED", f"internal error: {message}"), elapsed)


def _spec(registry: ToolRegistry, name: str) -> ToolSpec | None:
    tool = registry.get(name)
    return tool.spec if tool is not None else None


def _outcome(
    call: ToolCallRequest,
    output: ToolOutput,
    duration_ms: int,
    bounded: Bounded,
    reminder: str | None,
    synthetic: bool = False,
) -> ToolCallOutcome:
    return ToolCallOutcome(
        call_id=call.call_id,
        name=call.name,
        ok=output.ok,
        content=bounded.content,
        error=output.error,
        truncated=bounded.truncated,
        spill_locator=bounded.spill_locator,
        duration_ms=duration_ms,
        synthetic=synthetic,
        reminder=reminder,
        concludes_turn=output.ok and output.concludes_turn,
        data=output.data,
        spill_bytes=bounded.spill_bytes,
    )


def _log_executed(
    call: ToolCallRequest, output: ToolOutput, duration_ms: int, bounded: Bounded
) -> None:
    log.info(
        "tool_executed",
        tool=call.name,
        call_id=call.call_id,
        ok=output.ok,
        error_code=output.error.code if output.error else None,
        duration_ms=duration_ms,
        truncated=bounded.truncated,
    )
