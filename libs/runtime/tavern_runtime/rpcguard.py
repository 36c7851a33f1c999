"""The edge every RPC a service answers passes: a size limit, strings Postgres and UTF-8 can
hold, bounded nesting, a deadline, and an answer in the common error model whatever happens.

A broker middleware (`rpc_guard`) wraps each request/reply handler on `tavern.rpc.>`, so a
request that reaches a service is answered: a hostile body is refused before the handler runs,
a handler that raises or outlives the deadline still answers, and an error reply a handler
built itself is brought into the model. `tavern_runtime.unknownops` answers operations nobody
serves.

Under a flood the guard sheds instead of queueing without bound: each subject's handler runs one
request at a time, and when the requests waiting on the connection's RPC subscriptions hold
more than `max_backlog_bytes` (or `max_backlog` requests), the next one is answered at once
`unavailable` (retryable, reason `busy`) without being parsed. The queue drains as fast as
replies can be written, so the process keeps reading its socket and nats-server never finds it
a slow consumer; the subscriptions' own pending limits (`SUBSCRIPTION_PENDING`) stay above the
budget, so nats-py never drops a request silently.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from faststream import BaseMiddleware
from faststream.exceptions import HandlerException
from pydantic import ValidationError

from tavern_events.replies import ERROR_CODES, RETRYABLE, TIMEOUT_HEADER, error_reply
from tavern_runtime import pgerrors
from tavern_runtime.errors import TavernError
from tavern_runtime.logs import get_logger

log = get_logger(__name__)

RPC_PREFIX = "tavern.rpc."
MAX_DEPTH = 64
"""Deepest nesting of arrays and objects a request may have (JSON values such as a variable's
may nest; far less than this is ever needed)."""
Reply = dict[str, Any]

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class RpcLimits:
    """What every RPC of a service may ask: its body size and how long it may take; how much
    may wait on the connection before requests are shed."""

    max_request_bytes: int = 1024 * 1024
    deadline_s: float = 25.0
    max_depth: int = MAX_DEPTH
    max_backlog_bytes: int = 32 * 1024 * 1024
    max_backlog: int = 1024

    @property
    def subscription_pending(self) -> dict[str, int]:
        """nats-py pending limits of an RPC subscription: above the shedding budget (plus
        one request), so shedding, not a silent drop, answers a flood."""
        return {
            "pending_bytes_limit": 2 * self.max_backlog_bytes + 2 * self.max_request_bytes,
            "pending_msgs_limit": 2 * self.max_backlog + 16,
        }


def is_rpc(subject: str, reply_to: str | None) -> bool:
    """A request of the services' RPC space (a JetStream delivery has an ack subject, not a
    `tavern.rpc.` subject)."""
    return bool(reply_to) and subject.startswith(RPC_PREFIX)


# --- the checks (pure) ----------------------------------------------------------------------------


def too_large(raw: bytes, limits: RpcLimits) -> Reply | None:
    if len(raw) <= limits.max_request_bytes:
        return None
    return error_reply(
        "too_large",
        f"request of {len(raw)} bytes is over the {limits.max_request_bytes}-byte limit",
        limit_bytes=limits.max_request_bytes,
    )


def hostile(value: Any, max_depth: int = MAX_DEPTH) -> str | None:
    """What makes a decoded request unanswerable, with where it is; `None` if nothing does.

    NUL (Postgres text cannot hold it), a lone surrogate (not UTF-8), or nesting deeper than
    `max_depth`; keys are checked as well as values.
    """
    stack: list[tuple[Any, str, int]] = [(value, "body", 0)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, str):
            problem = _bad_text(item)
            if problem:
                return f"{path}: {problem}"
        elif isinstance(item, dict | list):
            if depth >= max_depth:
                return f"{path}: nested deeper than {max_depth} levels"
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            for key, child in pairs:
                if isinstance(key, str) and (problem := _bad_text(key)):
                    return f"{path}: a key: {problem}"
                stack.append((child, f"{path}.{key}", depth + 1))
    return None


def _bad_text(text: str) -> str | None:
    if "\x00" in text:
        return "contains U+0000 (NUL), which text cannot hold"
    if text.isascii():
        return None
    if _LONE_SURROGATE.search(text):
        return "contains a lone surrogate (not valid Unicode text)"
    return None


def check_body(body: Any, raw: bytes, limits: RpcLimits) -> Reply | None:
    """The refusal of a decoded request that no handler should see, or `None`."""
    if isinstance(body, bytes | bytearray | memoryview):
        if not raw.strip():
            return None  # no body: the handler's defaults
        return error_reply("invalid", "the request is not JSON (or not UTF-8)")
    problem = hostile(body, limits.max_depth)
    return error_reply("invalid", problem) if problem else None


CALLER_SHARE = 0.8
"""Of the time the caller waits, what the handler may use: the rest carries the reply back."""


def deadline_s(headers: Any, limits: RpcLimits) -> float:
    """The service's deadline, or less when the caller said it waits less (`TIMEOUT_HEADER`)."""
    raw = headers.get(TIMEOUT_HEADER) if isinstance(headers, dict) else None
    try:
        waits = float(raw) / 1000 if raw is not None else None
    except ValueError:
        waits = None
    if waits is None or waits <= 0:
        return limits.deadline_s
    return min(limits.deadline_s, waits * CALLER_SHARE)


# --- load ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Backlog:
    """Requests waiting on a connection's RPC subscriptions, behind the one being served."""

    requests: int = 0
    bytes: int = 0


def backlog_of(raw: Any) -> Backlog:
    """The backlog of the connection a nats-py message came in on (its RPC subscriptions)."""
    client = getattr(raw, "_client", None)
    subs = getattr(client, "_subs", None)
    if not isinstance(subs, dict):
        return Backlog()
    requests = size = 0
    for sub in _rpc_subscriptions(client, subs):  # one pass: this runs on every request
        requests += int(getattr(sub, "pending_msgs", 0))
        size += int(getattr(sub, "pending_bytes", 0))
    return Backlog(requests, size)


_RPC_SUBSCRIPTIONS: weakref.WeakKeyDictionary[Any, tuple[tuple[Any, ...], list[Any]]]
_RPC_SUBSCRIPTIONS = weakref.WeakKeyDictionary()
"""Per connection: its subscription ids when last looked at, and which of them serve RPCs.
A service holds some forty subscriptions and they change only when it (un)subscribes: every
request need not sort them again."""


def _rpc_subscriptions(client: Any, subs: dict[Any, Any]) -> list[Any]:
    sids = tuple(subs)
    try:
        known = _RPC_SUBSCRIPTIONS.get(client)
    except TypeError:  # a client that cannot be weakly referenced: no memory of it
        known = None
    if known is not None and known[0] == sids:
        return known[1]
    waiting = [s for s in subs.values() if str(getattr(s, "subject", "")).startswith(RPC_PREFIX)]
    with contextlib.suppress(TypeError):
        _RPC_SUBSCRIPTIONS[client] = (sids, waiting)
    return waiting


SHED_RETRY_MS = 200


def shed(backlog: Backlog, limits: RpcLimits) -> Reply | None:
    """`unavailable` (busy, retryable) when the backlog is over the budget, else `None`."""
    if backlog.bytes <= limits.max_backlog_bytes and backlog.requests <= limits.max_backlog:
        return None
    return error_reply(
        "unavailable",
        f"the service is busy ({backlog.requests} requests waiting); try again shortly",
        reason="busy",
        retry_after_ms=SHED_RETRY_MS,
    )


# --- failures as replies --------------------------------------------------------------------------


def failure_reply(exc: BaseException) -> Reply:
    """Any failure of a handler as a reply of the model; driver errors by what they mean (a
    `TimeoutError` or `OSError` inside a handler is a dependency away: `unavailable`)."""
    if isinstance(exc, TavernError):
        return exc.as_reply()
    translated = pgerrors.classify(exc)
    if translated is not None:
        return translated.as_reply()
    if isinstance(exc, ValidationError):  # a handler's typed body that does not validate
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors()[:5]
        )
        return error_reply("invalid", problems or "the request does not validate")
    if isinstance(exc, UnicodeError):
        return error_reply("invalid", "the request holds text that is not valid Unicode")
    if isinstance(exc, RecursionError):
        return error_reply("invalid", "the request is nested too deeply")
    return error_reply("internal", "internal error")


def normalised(reply: Any) -> Any:
    """An error reply brought into the model (a known code, a message, `retryable`): a
    handler's own `{"error": ...}` with a code from before the model is mapped, not passed on."""
    if not isinstance(reply, dict) or "error" not in reply:
        return reply
    error = reply["error"]
    if not isinstance(error, dict):
        return error_reply("internal", str(error))
    code = error.get("code")
    if code in ERROR_CODES and isinstance(error.get("retryable"), bool):
        return reply
    extra = {k: v for k, v in reply.items() if k != "error"}
    details = {k: v for k, v in error.items() if k not in ("code", "message", "retryable")}
    common = code if code in ERROR_CODES else "internal"
    if common != code and "reason" not in details and isinstance(code, str):
        details["reason"] = code
    retryable = error.get("retryable")
    return error_reply(
        common,  # type: ignore[arg-type]
        str(error.get("message") or code or "error"),
        retryable=retryable if isinstance(retryable, bool) else common in RETRYABLE,
        **{**extra, **details},
    )


# --- the middleware -------------------------------------------------------------------------------


class ShedCounter:
    """Counts shed requests; logs `rpc_shedding` at most once a second (a flood would
    otherwise write a line per request)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock, self.count, self.logged_at = clock, 0, float("-inf")

    def add(self, subject: str, backlog: Backlog) -> None:
        self.count += 1
        now = self.clock()
        if now - self.logged_at >= 1.0:
            self.logged_at = now
            log.warning(
                "rpc_shedding",
                subject=subject,
                shed=self.count,
                waiting=backlog.requests,
                waiting_bytes=backlog.bytes,
            )


class _Guard(BaseMiddleware):
    def __init__(
        self, msg: Any, /, *, context: Any, limits: RpcLimits, counter: ShedCounter
    ) -> None:
        super().__init__(msg, context=context)
        self.limits, self.counter = limits, counter

    async def consume_scope(self, call_next: Callable[[Any], Awaitable[Any]], msg: Any) -> Any:
        subject = str(getattr(msg.raw_message, "subject", ""))
        if not is_rpc(subject, msg.reply_to):
            return await call_next(msg)
        refused = too_large(msg.body, self.limits)
        if refused is None:
            backlog = backlog_of(msg.raw_message)
            refused = shed(backlog, self.limits)
            if refused is not None:
                self.counter.add(subject, backlog)
                return refused
        refused = refused or check_body(await msg.decode(), msg.body, self.limits)
        if refused is not None:
            log.info("rpc_refused", subject=subject, code=refused["error"]["code"])
            return refused
        return normalised(await self._run(call_next, msg, subject))

    async def _run(self, call_next: Callable[[Any], Awaitable[Any]], msg: Any, subject: str) -> Any:
        seconds = deadline_s(msg.headers, self.limits)
        deadline = asyncio.timeout(seconds)
        try:
            async with deadline:
                return await call_next(msg)
        except HandlerException:
            raise
        except Exception as exc:  # an RPC answers; the trace goes to the log, not the caller
            if isinstance(exc, TimeoutError) and deadline.expired():
                log.warning("rpc_deadline_exceeded", subject=subject, s=seconds)
                return error_reply("timeout", f"{subject} did not finish within {seconds:.3g}s")
            reply = failure_reply(exc)
            if reply["error"]["code"] == "internal":
                log.exception("rpc_failed", subject=subject, error=type(exc).__name__)
            else:
                log.info("rpc_refused", subject=subject, code=reply["error"]["code"])
            return reply


def rpc_guard(limits: RpcLimits) -> Callable[..., BaseMiddleware]:
    """A broker middleware that guards every `tavern.rpc.>` handler of the broker."""
    counter = ShedCounter()

    def build(msg: Any, /, *, context: Any) -> BaseMiddleware:
        return _Guard(msg, context=context, limits=limits, counter=counter)

    return build
