"""Tools every loop offers: `spill_read`, which pages through the calling session's spills."""

from __future__ import annotations

import asyncio
from typing import Any

from tavern_loop.tools.base import Tool, ToolContext, ToolOutput, ToolSpec
from tavern_loop.tools.spillstore import SpillError, SpillPage

SPILL_READ_DEFAULT_CHARS = 20_000
SPILL_READ_MAX_CHARS = 40_000

SPILL_READ_SPEC = ToolSpec(
    name="spill_read",
    description=(
        "Read a page of a tool result that was too large to show inline and was stored. "
        "Pass the locator from the notice (spill:...), an offset in characters and a limit "
        f"(default {SPILL_READ_DEFAULT_CHARS}, at most {SPILL_READ_MAX_CHARS})."
    ),
    parameters={
        "type": "object",
        "properties": {
            "locator": {"type": "string", "minLength": 1, "maxLength": 1024},
            "offset": {"type": "integer", "minimum": 0, "default": 0},
            "limit": {"type": "integer", "minimum": 1, "default": SPILL_READ_DEFAULT_CHARS},
        },
        "required": ["locator"],
        "additionalProperties": False,
    },
    parallel_safe=True,
)


def _footer(offset: int, page: SpillPage) -> str:
    end = offset + len(page.text)
    if page.next_offset is None:
        return f"\n\n[spill_read: characters {offset}-{end} of {page.total_chars}; end of output]"
    return (
        f"\n\n[spill_read: characters {offset}-{end} of {page.total_chars}; "
        f"continue with offset {page.next_offset}]"
    )


async def spill_read(args: Any, ctx: ToolContext) -> ToolOutput:
    """Only the calling session's spills: the session comes from the context, not the model."""
    if ctx.spill is None:
        return ToolOutput.failure("SPILL_UNAVAILABLE", "no spill store is configured")
    offset = int(args.get("offset", 0))
    limit = min(int(args.get("limit", SPILL_READ_DEFAULT_CHARS)), SPILL_READ_MAX_CHARS)
    try:
        page = await asyncio.to_thread(
            ctx.spill.read, ctx.session_id, args["locator"], offset, limit
        )
    except SpillError as exc:
        return ToolOutput.failure("SPILL_REFUSED", exc.message)
    data = {"total_chars": page.total_chars, "next_offset": page.next_offset}
    return ToolOutput(page.text + _footer(offset, page), data=data)


SPILL_READ = Tool(SPILL_READ_SPEC, spill_read)


def builtin_tools() -> list[Tool]:
    return [SPILL_READ]
