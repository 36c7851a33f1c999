"""The envelope of every ledger RPC: principal, size limit, parsing, per-caller rate,
structured errors.

A reply is the operation's result, or `{"error": {"code", "message", "retryable"}}`; an RPC
never answers with an exception trace, and an oversize reply becomes a `too_large` error.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from tavern_ledger.errors import RateLimited, RequestTooLarge
from tavern_ledger.ledger import Ledger
from tavern_ledger.requests import Request
from tavern_runtime import rpc, tracing
from tavern_runtime.context import Message
from tavern_runtime.errors import TavernError
from tavern_runtime.principals import Principal

R = TypeVar("R", bound=Request)
Reply = dict[str, Any]


def error_reply(exc: TavernError) -> Reply:
    return exc.as_reply()


def parse(raw: bytes, model: type[R], max_bytes: int) -> R:
    return rpc.parse(raw, model, max_bytes)


async def serve(
    ledger: Ledger,
    op: str,
    msg: Message,
    model: type[R],
    handle: Callable[[R, Principal], Awaitable[Reply]],
    *,
    bounded: bool = True,
) -> Reply:
    """Run one RPC inside the envelope (`bounded=False`: the reply is small by construction).
    `handle` gets the request and its verified principal, and authorizes before it acts."""

    async def work() -> Reply:
        principal = await ledger.access.principal(msg.headers, op)
        request = parse(msg.body, model, ledger.caps.max_request_bytes)
        key = " ".join(filter(None, (principal.label, request.rate_key())))
        if not ledger.limiter.allow(key, time.monotonic()):
            raise RateLimited("too many requests; slow down", key=key)
        reply = await handle(request, principal)
        return _bounded(reply, ledger.caps.max_reply_bytes) if bounded else reply

    with tracing.span(f"ledger.{op}", parent=msg.headers, kind="server"):
        return await rpc.answer(op, work)


def _bounded(reply: Reply, max_bytes: int) -> Reply:
    size = len(json.dumps(reply, default=str))
    if size > max_bytes:
        raise RequestTooLarge(f"the reply would be {size} bytes; ask for fewer results")
    return reply
