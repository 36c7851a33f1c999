"""What a tool is: its spec, the context it runs in, its output, and the registry of tools.

Scope (session, agent, binding) comes from the runner's context, never from model arguments.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jsonschema import Draft202012Validator, SchemaError

from tavern_runtime.errors import ConfigurationError

if TYPE_CHECKING:
    from tavern_loop.tools.spillstore import SpillStore

RpcCall = Callable[[str, dict[str, Any], float], Awaitable[dict[str, Any]]]
"""`(subject, payload, timeout) -> reply`: request/reply to a service, supplied by the runner."""


@dataclass(frozen=True)
class ToolError:
    code: str
    message: str


@dataclass(frozen=True)
class ToolOutput:
    """What a tool returns; `content` is the text the model sees."""

    content: str
    ok: bool = True
    error: ToolError | None = None
    data: dict[str, Any] | None = None
    concludes_turn: bool = False

    @classmethod
    def failure(cls, code: str, message: str) -> ToolOutput:
        """An error result: content `Error: <message>`, the code in `error`."""
        return cls(content=f"Error: {message}", ok=False, error=ToolError(code, message))


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]
    parallel_safe: bool = False
    timeout_s: float | None = None
    """None: the pipeline's default timeout applies."""
    max_result_bytes: int | None = None
    """A hard limit on this tool's result, tighter than the pipeline's."""

    def __post_init__(self) -> None:
        if self.timeout_s is not None and self.timeout_s <= 0:
            raise ConfigurationError(f"tool {self.name!r}: timeout_s must be > 0")
        if self.max_result_bytes is not None and self.max_result_bytes < 200:
            raise ConfigurationError(f"tool {self.name!r}: max_result_bytes must be >= 200")


@dataclass(frozen=True)
class ToolContext:
    session_id: str
    agent_id: str
    turn: int
    step: int
    call_id: str
    binding: Mapping[str, Any]
    rpc: RpcCall
    spill: SpillStore | None = None
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the turn is cancelled: a long tool should stop early."""


Handler = Callable[[Any, ToolContext], Awaitable[ToolOutput]]


@dataclass(frozen=True)
class Tool:
    spec: ToolSpec
    handler: Handler


class ToolRegistry:
    """The tools a loop can offer, by name; schemas are checked when registered."""

    def __init__(self, tools: list[Tool] | None = None) -> None:
        self._tools: dict[str, Tool] = {}
        self._validators: dict[str, Draft202012Validator] = {}
        self._schemas: list[dict[str, Any]] | None = None
        for tool in tools or []:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        name = tool.spec.name
        if name in self._tools:
            raise ConfigurationError(f"tool {name!r} is already registered")
        try:
            Draft202012Validator.check_schema(tool.spec.parameters)
        except SchemaError as exc:
            raise ConfigurationError(f"tool {name!r} has an invalid schema: {exc.message}") from exc
        self._tools[name] = tool
        self._validators[name] = Draft202012Validator(tool.spec.parameters)
        self._schemas = None

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def validator(self, name: str) -> Draft202012Validator:
        return self._validators[name]

    def names(self) -> list[str]:
        return list(self._tools)

    def schemas(self) -> list[dict[str, Any]]:
        """The tools in OpenAI function-tool format (only name, description, parameters); the
        same list until a tool is registered (callers must not change it)."""
        if self._schemas is None:
            self._schemas = [_function_schema(tool.spec) for tool in self._tools.values()]
        return self._schemas


def _function_schema(spec: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
        },
    }
