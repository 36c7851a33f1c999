"""A test-only loop replica process: one `LoopEngine` built from `TAVERN_*` variables.

`services/loop/tavern_loop/app.py` does not run the engine yet (it answers pings only), so the
process tests start `python -m tests.e2e.loop.replica` instead. It offers a `slow` tool (runs
for a minute) and `echo`, uses the offline model, and renews leases for
`TAVERN_TEST_LEASE_TTL_S` (default 2 s). SIGTERM stops it gracefully; SIGKILL is the point.
"""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any

from tavern_llm.offline import OfflineProvider
from tavern_llm.router import ProviderRouter
from tavern_loop.engine import EngineParts, LoopEngine
from tavern_loop.options import LoopOptions
from tavern_loop.tools.base import Tool, ToolContext, ToolOutput, ToolSpec
from tavern_loop.tools.builtin import builtin_tools
from tavern_runtime.logs import configure_logging
from tavern_runtime.settings import TavernSettings

OBJECT: dict[str, Any] = {"type": "object", "additionalProperties": False, "properties": {}}


async def _slow(args: Any, ctx: ToolContext) -> ToolOutput:
    await asyncio.sleep(60)
    return ToolOutput("slow finished")


async def _echo(args: Any, ctx: ToolContext) -> ToolOutput:
    return ToolOutput(f"echo: {args['text']}")


def tools() -> list[Tool]:
    echo_params = {**OBJECT, "properties": {"text": {"type": "string"}}, "required": ["text"]}
    return [
        *builtin_tools(),
        Tool(ToolSpec("slow", "Work for a minute.", OBJECT, timeout_s=120), _slow),
        Tool(ToolSpec("echo", "Echo the text back.", echo_params), _echo),
    ]


def parts() -> EngineParts:
    ttl = float(os.environ.get("TAVERN_TEST_LEASE_TTL_S", "2"))
    routes = {"chat": ["offline:offline-1"], "summarise": ["offline:offline-1"]}
    router = ProviderRouter({"offline": OfflineProvider()}, routes)
    return EngineParts(LoopOptions(lease_ttl_s=ttl, recall=False), router, tools())


async def main() -> None:
    settings = TavernSettings()
    configure_logging("loop-replica", settings.log_level, "json")
    engine = LoopEngine(settings, parts(), name=f"replica-{os.getpid()}")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await engine.start()
    try:
        await stop.wait()
    finally:
        await engine.stop(grace_s=2)


if __name__ == "__main__":
    asyncio.run(main())
