"""A recording runner for pipeline tests: callbacks log what the runner would append."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from tavern_loop.tools import (
    SpillStore,
    Tool,
    ToolCallOutcome,
    ToolCallRequest,
    ToolContext,
    ToolOutput,
    ToolPipeline,
    ToolSpec,
    TurnBudget,
)

OBJECT = {"type": "object"}


async def no_rpc(subject: str, payload: dict[str, Any], timeout: float) -> dict[str, Any]:
    raise AssertionError(f"unexpected rpc to {subject}")


def call(call_id: str, name: str, arguments: str = "{}") -> ToolCallRequest:
    return ToolCallRequest(call_id=call_id, name=name, arguments_raw=arguments)


def tool(
    name: str,
    handler: Callable[[Any, ToolContext], Awaitable[ToolOutput]],
    *,
    parameters: dict[str, Any] | None = None,
    parallel_safe: bool = False,
    timeout_s: float | None = None,
) -> Tool:
    spec = ToolSpec(
        name,
        f"the {name} tool",
        OBJECT if parameters is None else parameters,
        parallel_safe,
        timeout_s,
    )
    return Tool(spec, handler)


def echo(text: str = "done") -> Callable[[Any, ToolContext], Awaitable[ToolOutput]]:
    async def handle(args: Any, ctx: ToolContext) -> ToolOutput:
        return ToolOutput(text)

    return handle


@dataclass
class Recorder:
    """Plays the runner: builds contexts and records `tool/call` and `tool/result` appends."""

    session_id: str = "s1"
    agent_id: str = "main"
    spill: SpillStore | None = None
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    budget: TurnBudget = field(default_factory=TurnBudget)
    log: list[tuple[str, str]] = field(default_factory=list)
    started: list[ToolCallRequest] = field(default_factory=list)
    results: list[ToolCallOutcome] = field(default_factory=list)

    def context(self, request: ToolCallRequest) -> ToolContext:
        return ToolContext(
            session_id=self.session_id,
            agent_id=self.agent_id,
            turn=1,
            step=1,
            call_id=request.call_id,
            binding={"scope": "test"},
            rpc=no_rpc,
            spill=self.spill,
            cancelled=self.cancelled,
        )

    async def on_started(self, request: ToolCallRequest) -> None:
        self.started.append(request)
        self.log.append(("call", request.call_id))

    async def on_result(self, outcome: ToolCallOutcome) -> None:
        self.results.append(outcome)
        self.log.append(("result", outcome.call_id))

    async def run(self, pipeline: ToolPipeline, *calls: ToolCallRequest) -> list[ToolCallOutcome]:
        return await pipeline.run(
            list(calls),
            self.context,
            self.on_started,
            self.on_result,
            self.cancelled,
            self.budget,
        )
