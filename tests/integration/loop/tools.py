"""Tools the loop's acceptance tests register: echo, timed parallel calls, a gate, big output.

Each `ToolBench` keeps what its tools observed (finish order, gates) so a test can assert on it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from tavern_loop.tools.base import Tool, ToolContext, ToolOutput, ToolSpec

OBJECT = {"type": "object", "additionalProperties": False}


def numbered_text(chars: int) -> str:
    """Distinct lines (`line 00001 ...`) so a page of it shows where it came from."""
    lines, size, index = [], 0, 0
    while size < chars:
        line = f"line {index:05d} of the big tool output\n"
        lines.append(line)
        size += len(line)
        index += 1
    return "".join(lines)[:chars]


@dataclass
class ToolBench:
    finished: list[str] = field(default_factory=list)
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    gate_entered: asyncio.Event = field(default_factory=asyncio.Event)
    gate_cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    big_chars: int = 30_000

    def tools(self) -> list[Tool]:
        return [self.echo(), self.sleepy(), self.gated(), self.big(), self.noop()]

    def echo(self) -> Tool:
        spec = ToolSpec(
            name="echo",
            description="Echo the text back.",
            parameters={
                **OBJECT,
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
            },
        )

        async def run(args: Any, ctx: ToolContext) -> ToolOutput:
            return ToolOutput(f"echo: {args['text']}")

        return Tool(spec, run)

    def sleepy(self) -> Tool:
        spec = ToolSpec(
            name="sleepy",
            description="Sleep `ms` milliseconds, then answer the tag.",
            parameters={
                **OBJECT,
                "properties": {"tag": {"type": "string"}, "ms": {"type": "integer"}},
                "required": ["tag", "ms"],
            },
            parallel_safe=True,
        )

        async def run(args: Any, ctx: ToolContext) -> ToolOutput:
            await asyncio.sleep(args["ms"] / 1000)
            self.finished.append(args["tag"])
            return ToolOutput(f"woke {args['tag']}")

        return Tool(spec, run)

    def gated(self) -> Tool:
        """Runs until the test opens the gate (or the turn is cancelled)."""
        spec = ToolSpec(
            name="gate",
            description="Wait until the gate opens.",
            parameters={**OBJECT, "properties": {}},
        )

        async def run(args: Any, ctx: ToolContext) -> ToolOutput:
            self.gate_entered.set()
            opened = asyncio.ensure_future(self.gate.wait())
            cancelled = asyncio.ensure_future(ctx.cancelled.wait())
            try:
                await asyncio.wait({opened, cancelled}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                opened.cancel()
                cancelled.cancel()
            if ctx.cancelled.is_set():
                self.gate_cancelled.set()
                return ToolOutput.failure("CANCELLED", "the gate stopped waiting: cancelled")
            return ToolOutput("the gate opened")

        return Tool(spec, run)

    def big(self) -> Tool:
        spec = ToolSpec(
            name="big",
            description="Return a long text.",
            parameters={**OBJECT, "properties": {}},
        )

        async def run(args: Any, ctx: ToolContext) -> ToolOutput:
            return ToolOutput(numbered_text(self.big_chars))

        return Tool(spec, run)

    def noop(self) -> Tool:
        spec = ToolSpec(
            name="noop",
            description="Do nothing.",
            parameters={**OBJECT, "properties": {}},
            parallel_safe=True,
        )

        async def run(args: Any, ctx: ToolContext) -> ToolOutput:
            return ToolOutput("nothing done")

        return Tool(spec, run)
