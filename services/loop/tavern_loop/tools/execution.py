"""One call through pre-execute (lookup, authorise, limits, argument validation) and execute.

A rejection is an ordinary error output, so it still reaches post-execute like any result.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import structlog
from jsonschema.exceptions import best_match

from tavern_loop.tools.base import Tool, ToolContext, ToolError, ToolOutput, ToolRegistry
from tavern_loop.tools.limits import ToolLimits, timeout_for, timeout_ms

log = structlog.get_logger(__name__)

Authorise = Callable[[str, ToolContext], str | Awaitable[str | None] | None]
"""`(tool name, context) -> reason to deny, or None`; may be sync or async."""

_MESSAGE_CHARS = 1000


@dataclass(frozen=True)
class ToolCallRequest:
    call_id: str
    name: str
    arguments_raw: str
    """Exactly what the model wrote; the runner logs it verbatim in `tool/call`."""


@dataclass(frozen=True)
class Executed:
    output: ToolOutput
    duration_ms: int


def parse_arguments(raw: str) -> Any:
    """Empty text is `{}`, JSON is parsed, anything else reaches validation as the raw string."""
    if not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, RecursionError):  # nested too deep is not JSON we can take
        return raw


def _short(text: str) -> str:
    return text if len(text) <= _MESSAGE_CHARS else text[:_MESSAGE_CHARS] + "…"


def timed_out(seconds: float) -> ToolOutput:
    return ToolOutput.failure("TOOL_TIMEOUT", f"tool call timed out after {timeout_ms(seconds)}ms")


def normalise(output: object) -> ToolOutput:
    """A tool's output made consistent: an error means not ok; turns conclude only on success."""
    if not isinstance(output, ToolOutput):
        name = type(output).__name__
        return ToolOutput.failure("INVALID_TOOL_OUTPUT", f"tool returned {name}, not ToolOutput")
    if output.ok and output.error is None:
        return output
    error = output.error or ToolError("TOOL_FAILED", _short(output.content))
    return ToolOutput(output.content, ok=False, error=error, data=output.data)


class CallExecutor:
    """Runs one started call: pre-execute checks, then the body under its deadline."""

    def __init__(
        self, registry: ToolRegistry, limits: ToolLimits, authorise: Authorise | None
    ) -> None:
        self.registry = registry
        self.limits = limits
        self.authorise = authorise

    async def run(self, call: ToolCallRequest, ctx: ToolContext, ordinal: int) -> Executed:
        """`ordinal` is the call's 1-based position among the calls started this turn."""
        started = time.monotonic()
        tool = self.registry.get(call.name)
        rejection, args = await self._pre_execute(call, ctx, tool, ordinal)
        if rejection is not None or tool is None:
            output = rejection or _unknown(call.name)
            log.info("tool_rejected", tool=call.name, call_id=call.call_id, code=_code(output))
            return Executed(output, _elapsed_ms(started))
        output = await self._execute(tool, args, ctx)
        return Executed(output, _elapsed_ms(started))

    async def _pre_execute(
        self, call: ToolCallRequest, ctx: ToolContext, tool: Tool | None, ordinal: int
    ) -> tuple[ToolOutput | None, Any]:
        if ordinal > self.limits.max_calls_per_turn:
            limit = self.limits.max_calls_per_turn
            return _fail("TOOL_CALL_LIMIT", f"tool call limit reached: {limit} per turn"), None
        if tool is None:
            return _unknown(call.name), None
        reason = await self._denied(call.name, ctx)
        if reason is not None:
            return _fail("TOOL_DENIED", reason), None
        return self._arguments(call, tool)

    async def _denied(self, name: str, ctx: ToolContext) -> str | None:
        if self.authorise is None:
            return None
        verdict = self.authorise(name, ctx)
        return await verdict if inspect.isawaitable(verdict) else verdict

    def _arguments(self, call: ToolCallRequest, tool: Tool) -> tuple[ToolOutput | None, Any]:
        size = len(call.arguments_raw.encode("utf-8"))
        if size > self.limits.max_argument_bytes:
            limit = self.limits.max_argument_bytes
            message = f"arguments too large: {size} bytes (limit {limit})"
            return _fail("ARGUMENTS_TOO_LARGE", message), None
        args = parse_arguments(call.arguments_raw)
        error = best_match(self.registry.validator(tool.spec.name).iter_errors(args))
        if error is None:
            return None, args
        where = f" at {error.json_path}" if error.path else ""
        return _fail("INVALID_ARGS", f"invalid arguments: {_short(error.message)}{where}"), None

    async def _execute(self, tool: Tool, args: Any, ctx: ToolContext) -> ToolOutput:
        seconds = timeout_for(tool.spec, self.limits)
        deadline = asyncio.timeout(seconds)
        try:
            async with deadline:
                return normalise(await tool.handler(args, ctx))
        except Exception as exc:
            if isinstance(exc, TimeoutError) and deadline.expired():
                log.info("tool_timed_out", tool=tool.spec.name, timeout_ms=timeout_ms(seconds))
                return timed_out(seconds)
            log.warning("tool_failed", tool=tool.spec.name, call_id=ctx.call_id, exc_info=exc)
            return _fail("TOOL_FAILED", _short(str(exc) or type(exc).__name__))


def _fail(code: str, message: str) -> ToolOutput:
    return ToolOutput.failure(code, message)


def _unknown(name: str) -> ToolOutput:
    return _fail("UNKNOWN_TOOL", f'unknown tool "{name}"')


def _code(output: ToolOutput) -> str | None:
    return output.error.code if output.error else None


def _elapsed_ms(started: float) -> int:
    return round((time.monotonic() - started) * 1000)
