"""The envelope of every ledger RPC: size limit, parsing, per-caller rate, structured errors.

A reply is the operation's result, or `{"error": {"code", "message"}}`; an RPC never answers
with an exception trace, and an oversize reply becomes a `too_large` error.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pydantic import ValidationError

from tavern_ledger.errors import RateLimited, RequestInvalid, RequestTooLarge
from tavern_ledger.ledger import Ledger
from tavern_ledger.requests import Request
from tavern_runtime.errors import TavernError
from tavern_runtime.logs import get_logger

log = get_logger(__name__)

R = TypeVar("R", bound=Request)
Reply = dict[str, Any]


def error_reply(exc: TavernError) -> Reply:
    return {"error": exc.as_dict()}


def parse(raw: bytes, model: type[R], max_bytes: int) -> R:
    if len(raw) > max_bytes:
        raise RequestTooLarge(f"request of {len(raw)} bytes is over the {max_bytes}-byte limit")
    try:
        return model.model_validate_json(raw or b"{}")
    except ValidationError as exc:
        detail = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors()[:5]
        )
        raise RequestInvalid(detail) from None


async def serve(
    ledger: Ledger,
    op: str,
    raw: bytes,
    model: type[R],
    handle: Callable[[R], Awaitable[Reply]],
    *,
    bounded: bool = True,
) -> Reply:
    """Run one RPC inside the envelope (`bounded=False`: the reply is small by construction)."""
    started = time.perf_counter()
    try:
        request = parse(raw, model, ledger.caps.max_request_bytes)
        if not ledger.limiter.allow(request.rate_key(), time.monotonic()):
            raise RateLimited("too many requests; slow down", key=request.rate_key())
        reply = await handle(request)
        if bounded:
            reply = _bounded(reply, ledger.caps.max_reply_bytes)
    except TavernError as exc:
        log.info("rpc_refused", op=op, code=exc.code, error=exc.message)
        return error_reply(exc)
    except Exception as exc:  # an RPC answers; the trace goes to the log, not the caller
        log.exception("rpc_failed", op=op, error=repr(exc))
        return {"error": {"code": "internal", "message": "internal error"}}
    log.info("rpc_served", op=op, ms=round((time.perf_counter() - started) * 1000, 2))
    return reply


def _bounded(reply: Reply, max_bytes: int) -> Reply:
    size = len(json.dumps(reply, default=str))
    if size > max_bytes:
        raise RequestTooLarge(f"the reply would be {size} bytes; ask for fewer results")
    return reply
