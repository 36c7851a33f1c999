"""The edge every RPC a service answers passes: a size limit, strings Postgres and UTF-8 can
hold, bounded nesting, a deadline, and an answer in the common error model whatever happens.

A broker middleware (`rpc_guard`) wraps each request/reply handler on `tavern.rpc.>`, so a
request that reaches a service is answered: a hostile body is refused before the handler runs,
a handler that raises or outlives the deadline still answers, and an error reply a handler
built itself is brought into the model. `tavern_runtime.unknownops` answers operations nobody
serves.
"""

from __future__ import annotations

import asyncio
import re
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
    """What every RPC of a service may ask: its body size and how long it may take."""

    max_request_bytes: int = 1024 * 1024
    deadline_s: float = 25.0
    max_depth: int = MAX_DEPTH


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


class _Guard(BaseMiddleware):
    def __init__(self, msg: Any, /, *, context: Any, limits: RpcLimits) -> None:
        super().__init__(msg, context=context)
        self.limits = limits

    async def consume_scope(self, call_next: Callable[[Any], Awaitable[Any]], msg: Any) -> Any:
        subject = str(getattr(msg.raw_message, "subject", ""))
        if not is_rpc(subject, msg.reply_to):
            return await call_next(msg)
        refused = too_large(msg.body, self.limits) or check_body(
            await msg.decode(), msg.body, self.limits
        )
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

    def build(msg: Any, /, *, context: Any) -> BaseMiddleware:
        return _Guard(msg, context=context, limits=limits)

    return build
