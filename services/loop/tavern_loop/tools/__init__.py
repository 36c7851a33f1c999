"""The loop's tool pipeline: specs and registry, scheduling, limits, spill and built-in tools."""

from tavern_loop.tools.base import (
    RpcCall,
    Tool,
    ToolContext,
    ToolError,
    ToolOutput,
    ToolRegistry,
    ToolSpec,
)
from tavern_loop.tools.bounds import SpillPolicy
from tavern_loop.tools.builtin import SPILL_READ, builtin_tools
from tavern_loop.tools.execution import Authorise, ToolCallRequest, parse_arguments
from tavern_loop.tools.limits import ToolLimits, TurnBudget
from tavern_loop.tools.pipeline import ToolCallOutcome, ToolPipeline
from tavern_loop.tools.spillstore import SpillError, SpillPage, SpillStore

__all__ = [
    "SPILL_READ",
    "Authorise",
    "RpcCall",
    "SpillError",
    "SpillPage",
    "SpillPolicy",
    "SpillStore",
    "Tool",
    "ToolCallOutcome",
    "ToolCallRequest",
    "ToolContext",
    "ToolError",
    "ToolLimits",
    "ToolOutput",
    "ToolPipeline",
    "ToolRegistry",
    "ToolSpec",
    "TurnBudget",
    "builtin_tools",
    "parse_arguments",
]
