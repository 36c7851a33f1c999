"""The envelope shared by the services' RPCs: a size limit, parsing into a pydantic model with a
readable error, and an answer that is the result or `{"error": {code, message, retryable}}`
(`tavern_events.replies`), never a trace, with one log line per call."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from tavern_runtime.errors import PermanentError, TavernError
from tavern_runtime.logs import get_logger
from tavern_runtime.rpcguard import failure_reply

log = get_logger(__name__)

R = TypeVar("R", bound=BaseModel)
Reply = dict[str, Any]


class RequestInvalid(PermanentError):
    """A malformed request: not JSON, or missing or ill-typed fields."""

    code = "invalid"


class RequestTooLarge(PermanentError):
    code = "too_large"


def parse(raw: bytes, model: type[R], max_bytes: int) -> R:
    """`raw` as `model` (an empty body is `{}`); `RequestTooLarge` or `RequestInvalid` else."""
    if len(raw) > max_bytes:
        raise RequestTooLarge(f"request of {len(raw)} bytes is over the {max_bytes}-byte limit")
    try:
        return model.model_validate_json(raw or b"{}")
    except ValidationError as exc:
        raise RequestInvalid(validation_detail(exc)) from None


def validation_detail(exc: ValidationError, most: int = 5) -> str:
    """The first `most` problems as `field.path: message`, joined."""
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors()[:most]
    )


async def answer(op: str, work: Callable[[], Awaitable[Reply]]) -> Reply:
    """Run `work` as RPC `op`: its reply, a refusal's error, or an `internal` error (logged)."""
    started = time.perf_counter()
    try:
        reply = await work()
    except TavernError as exc:
        log.info("rpc_refused", op=op, code=exc.reply_code(), error=exc.message)
        return exc.as_reply()
    except Exception as exc:  # an RPC answers; the trace goes to the log, not the caller
        reply = failure_reply(exc)
        if reply["error"]["code"] == "internal":
            log.exception("rpc_failed", op=op, error=type(exc).__name__)
        else:
            log.info("rpc_refused", op=op, code=reply["error"]["code"], error=type(exc).__name__)
        return reply
    log.info("rpc_served", op=op, ms=round((time.perf_counter() - started) * 1000, 2))
    return reply
