"""The profiles' tool policy, checked before a call reaches its service.

Writes default to the session's chat, character and agent scopes: a `global` write and a bulk
delete are refused with the reason unless configuration allows them (the ledger enforces its
own rules too). There is no cross-character write to allow: no schema can name another
character, chat or session. `st` sessions are offered no tools, so any call they make is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tavern_loop.options import ProfileOptions
from tavern_loop.tools.base import Tool, ToolContext, ToolOutput
from tavern_loop.tools.ledger_tools import ledger_tools
from tavern_loop.tools.tavern_tools import tavern_tools

GLOBAL_REFUSED = (
    "global scope writes are disabled; use the chat, character or agent scope, or ask the user "
    "to enable global writes (TAVERN_LOOP_ALLOW_GLOBAL_WRITES)"
)
BULK_REFUSED = (
    "bulk deletes are disabled: delete one variable per call with variable_delete, or ask the "
    "user to enable bulk deletes"
)
ST_REFUSED = "st sessions have no tools: the SillyTavern prompt is assembled by the loop"
GLOBAL_WRITERS = frozenset({"memory_write", "variable_set", "variable_patch", "variable_delete"})


def refusal(name: str, args: Any, options: ProfileOptions) -> str | None:
    """Why this call is refused by the write policy, or None."""
    given: Mapping[str, Any] = args if isinstance(args, dict) else {}
    if (
        name in GLOBAL_WRITERS
        and given.get("scope") == "global"
        and not options.allow_global_writes
    ):
        return GLOBAL_REFUSED
    if name == "variable_patch" and not options.allow_bulk_deletes:
        deletes = [c for c in given.get("changes") or [] if isinstance(c, dict) and c.get("delete")]
        if len(deletes) > 1:
            return BULK_REFUSED
    return None


def guarded(tool: Tool, options: ProfileOptions) -> Tool:
    """`tool` behind the write policy (a refusal is an ordinary failed result)."""
    if tool.spec.name not in GLOBAL_WRITERS:
        return tool
    inner = tool.handler

    async def run(args: Any, ctx: ToolContext) -> ToolOutput:
        reason = refusal(tool.spec.name, args, options)
        if reason is not None:
            return ToolOutput.failure("FORBIDDEN", reason)
        return await inner(args, ctx)

    return Tool(tool.spec, run)


def authorise(name: str, ctx: ToolContext) -> str | None:
    """The pipeline's pre-execute hook: an st session's calls are refused."""
    return ST_REFUSED if ctx.binding.get("architecture") == "st" else None


def profile_tools(options: ProfileOptions) -> list[Tool]:
    """The agent-tavern tool surface: the read-only tavern tools, then memory and variables."""
    return [*tavern_tools(), *(guarded(t, options) for t in ledger_tools())]
