"""The envelope of every consolidator RPC (the shared one of `tavern_runtime.rpc`): parse, run,
answer `{"error": {code, message}}` on failure (never a trace), one log line per call."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pydantic import BaseModel

from tavern_runtime import rpc

R = TypeVar("R", bound=BaseModel)
Reply = dict[str, Any]
MAX_REQUEST_BYTES = 256 * 1024


def parse(raw: bytes, model: type[R]) -> R:
    return rpc.parse(raw, model, MAX_REQUEST_BYTES)


async def serve(
    op: str, raw: bytes, model: type[R], handle: Callable[[R], Awaitable[Reply]]
) -> Reply:
    return await rpc.answer(op, lambda: handle(parse(raw, model)))
