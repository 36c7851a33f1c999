"""The gateway's answers to what went wrong: the common error model as JSON with an HTTP status,
never a trace."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from tavern_runtime.errors import PermanentError, TavernError, TransientError
from tavern_runtime.logs import get_logger

log = get_logger(__name__)

STATUS = {
    "unauthenticated": 401,
    "forbidden": 403,
    "not_found": 404,
    "conflict": 409,
    "too_large": 413,
    "rate_limited": 429,
    "unavailable": 503,
    "timeout": 504,
    "internal": 500,
}


class ApiError(PermanentError):
    """A refusal of the gateway itself: a code of the common model and, if given, a finer
    reason (`csrf`, `invalid_card`)."""

    def __init__(self, code: str, message: str, reason: str | None = None, **details: Any) -> None:
        super().__init__(message, **details)
        self.code = code
        self.reason = reason


def body(code: str, message: str, retryable: bool = False, **more: Any) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "retryable": retryable, **more}}


def respond(exc: TavernError, headers: dict[str, str] | None = None) -> JSONResponse:
    """The common error model (`tavern_events.replies`), with the HTTP status of its code."""
    found = exc.as_dict()
    if isinstance(exc, TransientError):
        found["retryable"] = True
    found = {k: v for k, v in found.items() if isinstance(v, str | int | float | bool | None)}
    status = STATUS.get(str(found["code"]), 503 if found["retryable"] else 400)
    return JSONResponse({"error": found}, status_code=status, headers=headers)


async def on_tavern_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, TavernError)
    return respond(exc, getattr(exc, "headers", None))


async def on_validation(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    problems = "; ".join(
        f"{'.'.join(str(p) for p in e['loc'][1:]) or 'body'}: {e['msg']}" for e in exc.errors()[:5]
    )
    return JSONResponse(body("invalid", problems or "invalid request"), status_code=400)


async def on_http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed", 413: "too_large"}.get(
        exc.status_code, "invalid"
    )
    return JSONResponse(body(code, str(exc.detail)), status_code=exc.status_code)


async def on_crash(request: Request, exc: Exception) -> JSONResponse:
    log.exception("gateway_request_failed", path=request.url.path, error=type(exc).__name__)
    return JSONResponse(
        body("internal", "something went wrong on our side; nothing you sent was lost"),
        status_code=500,
    )
