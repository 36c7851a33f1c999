"""The store RPCs at the edge: principal, size, shape and rate checks, ownership of the
session, a deadline, structured errors.

Every reply is a JSON object; a failure is `{"error": {"code", "message", "retryable", ...}}`
(for a conflict, `error.current_revision`), never an exception the caller would see as a
timeout; a database error is `invalid` when the data is at fault, `unavailable` only when
Postgres is.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import asyncpg

from tavern_events.replies import error_reply as error_reply_of
from tavern_ledger.domain import store_requests as shapes
from tavern_ledger.domain.store_ratelimit import RateLimiter
from tavern_ledger.memorystore import operations as memory
from tavern_ledger.toolcalls.context import StoreContext
from tavern_ledger.toolcalls.errors import (
    DeadlineExceeded,
    RateLimited,
    StoreUnavailable,
    TooLarge,
    UnknownSession,
)
from tavern_ledger.variables import operations as variables
from tavern_runtime import pgerrors
from tavern_runtime.errors import TavernError
from tavern_runtime.logs import get_logger
from tavern_runtime.principals import Principal

log = get_logger(__name__)

R = TypeVar("R", bound=shapes.StoreRequest)
Reply = dict[str, Any]


@dataclass(frozen=True)
class Operation(Generic[R]):
    """One RPC: `tavern.rpc.ledger.<name>`, its request shape and what it runs."""

    name: str
    request: type[R]
    run: Callable[[StoreContext, R], Awaitable[Reply]]
    writes: bool = False


OPERATIONS: tuple[Operation[Any], ...] = (
    Operation("memory.search", shapes.MemorySearch, memory.search),
    Operation("memory.read", shapes.MemoryRead, memory.read),
    Operation("memory.write", shapes.MemoryWrite, memory.write, writes=True),
    Operation("memory.update", shapes.MemoryUpdate, memory.update, writes=True),
    Operation("memory.forget", shapes.MemoryForget, memory.forget, writes=True),
    Operation("variable.get", shapes.VariableGet, variables.get),
    Operation("variable.set", shapes.VariableSet, variables.set_, writes=True),
    Operation("variable.patch", shapes.VariablePatch, variables.patch, writes=True),
    Operation("variable.delete", shapes.VariableDelete, variables.delete, writes=True),
    Operation("variable.list", shapes.VariableList, variables.list_),
)


class Authorizer(Protocol):
    """Who asks, and whether they may act on the session they name (`tavern_ledger.access`)."""

    async def principal(self, headers: Mapping[str, str] | None, op: str) -> Principal: ...

    async def session(self, principal: Principal, session_id: str, op: str) -> None: ...


def error_reply(exc: TavernError) -> Reply:
    """`{"error": {"code", "message", "retryable", ...details}}`."""
    return exc.as_reply()


async def serve(
    ctx: StoreContext,
    limiter: RateLimiter,
    op: Operation[Any],
    data: bytes,
    access: Authorizer,
    headers: Mapping[str, str] | None,
    clock: Callable[[], float] = time.monotonic,
) -> Reply:
    """Answer one request; logs one line with the outcome."""
    started = clock()
    session_id: str | None = None
    try:
        principal = await access.principal(headers, op.name)
        request = shapes.parse(op.request, shapes.load_json(data, ctx.limits.max_request_bytes))
        session_id = request.session_id
        _check_rate(limiter, f"{principal.label} {session_id}", clock())
        reply = await _run(ctx, op, request, lambda: access.session(principal, session_id, op.name))
    except TavernError as exc:
        reply = error_reply(exc)
    except Exception as exc:  # the caller gets an answer, never a timeout
        log.exception("store_rpc_crashed", op=op.name, session_id=session_id, error=repr(exc))
        reply = error_reply_of("internal", "the store failed on this request")
    _log_outcome(op, session_id, reply, clock() - started)
    return reply


Check = Callable[[], Awaitable[None]]


async def _run(
    ctx: StoreContext, op: Operation[Any], request: shapes.StoreRequest, authorize: Check
) -> Reply:
    try:
        async with asyncio.timeout(ctx.limits.deadline_s):
            reply = await _bound_run(ctx, op, request, authorize)
    except TimeoutError:
        raise DeadlineExceeded(
            f"{op.name} did not finish within {ctx.limits.deadline_s}s"
        ) from None
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, UnicodeEncodeError) as exc:
        translated = pgerrors.classify(exc)
        if not isinstance(translated, pgerrors.StoreRejected):
            log.error(
                "store_database_failed", op=op.name, error=type(exc).__name__, detail=str(exc)
            )
            raise StoreUnavailable("the store's database is unavailable; try again") from None
        log.info("store_data_rejected", op=op.name, error=type(exc).__name__)
        raise translated from None
    return _bounded(reply, ctx.limits.max_reply_bytes)


async def _bound_run(
    ctx: StoreContext, op: Operation[Any], request: shapes.StoreRequest, authorize: Check
) -> Reply:
    """Authorize, then run `op`; a session whose binding has not reached the store yet is
    read from its log once and the whole asked again."""
    try:
        await authorize()
        return await op.run(ctx, request)
    except UnknownSession:
        if ctx.catch_up is None or not await ctx.catch_up(request.session_id):
            raise
        log.info("binding_caught_up", session_id=request.session_id, op=op.name)
        await authorize()
        return await op.run(ctx, request)


def _check_rate(limiter: RateLimiter, key: str, now: float) -> None:
    """One request of `key`: its principal and the session it names, so that requests another
    caller is refused for (the limit answers before authorization) never spend a session's."""
    decision = limiter.take(key, now)
    if not decision.allowed:
        raise RateLimited(
            "too many store requests from this session; slow down",
            retry_after_ms=round(decision.retry_after_s * 1000),
        )


def _bounded(reply: Reply, max_bytes: int) -> Reply:
    size = len(json.dumps(reply, ensure_ascii=False, default=str).encode("utf-8"))
    if size > max_bytes:
        raise TooLarge(f"the result is {size} bytes; the limit is {max_bytes}: ask for less")
    return reply


def _log_outcome(op: Operation[Any], session_id: str | None, reply: Reply, took_s: float) -> None:
    error = reply.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    log.info(
        "store_rpc_handled",
        op=op.name,
        session_id=session_id,
        outcome=code or "ok",
        duration_ms=round(took_s * 1000, 1),
    )
