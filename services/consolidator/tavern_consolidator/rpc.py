"""The envelope of every consolidator RPC: parse, run, answer `{"error": {code, message}}` on
failure (never a trace), one log line per call."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from tavern_consolidator.errors import RequestInvalid
from tavern_runtime.errors import TavernError
from tavern_runtime.logs import get_logger

log = get_logger(__name__)

R = TypeVar("R", bound=BaseModel)
Reply = dict[str, Any]
MAX_REQUEST_BYTES = 256 * 1024


def parse(raw: bytes, model: type[R]) -> R:
    if len(raw) > MAX_REQUEST_BYTES:
        raise RequestInvalid(f"request of {len(raw)} bytes is over {MAX_REQUEST_BYTES}")
    try:
        return model.model_validate_json(raw or b"{}")
    except ValidationError as exc:
        detail = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors()[:5]
        )
        raise RequestInvalid(detail) from None


async def serve(
    op: str, raw: bytes, model: type[R], handle: Callable[[R], Awaitable[Reply]]
) -> Reply:
    started = time.perf_counter()
    try:
        reply = await handle(parse(raw, model))
    except TavernError as exc:
        log.info("rpc_refused", op=op, code=exc.code, error=exc.message)
        return {"error": exc.as_dict()}
    except Exception as exc:  # an RPC answers; the trace goes to the log, not the caller
        log.exception("rpc_failed", op=op, error=repr(exc))
        return {"error": {"code": "internal", "message": "internal error"}}
    log.info("rpc_served", op=op, ms=round((time.perf_counter() - started) * 1000, 2))
    return reply
