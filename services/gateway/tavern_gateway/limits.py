"""The request body limit, before anything parses a body: a pure ASGI middleware that counts
bytes as they arrive and refuses with 413 in the common error model once over the limit.

A declared `Content-Length` over the limit is refused before a byte is read; a body without
one (chunked) or longer than it declares is cut off at the first chunk past the limit, so a
request never costs the gateway more than the limit plus one chunk, whatever it claims. (The
server then reads what the client still sends and drops it, so the client gets its 413.)"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tavern_gateway.errors import body

UPLOADS = (
    re.compile(r"^/api/assets$"),
    re.compile(r"^/api/sessions/[^/]+/memory/import$"),
)
"""The routes that take a file (cards, lorebooks, personas, memory exports): the upload limit."""
MULTIPART_OVERHEAD = 64 * 1024
"""A file's form encoding (boundaries, part headers, the other fields) on top of its bytes."""
UPLOAD_SLACK = 2
"""A file route takes bodies up to twice its file limit: up to there the route itself reads
the file (spooled to disk past 1 MiB) and answers which file is too large; past it, this."""


class BodyTooLarge(HTTPException):
    """Raised from `receive` past the limit: FastAPI passes it on as the HTTP error it is, so
    the handler of HTTP errors answers it in the error model."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is over the {limit}-byte limit of this route")


def limit_for(path: str, default: int, upload: int) -> int:
    """The body limit of a path: twice the upload limit (plus form encoding) for file routes."""
    if any(p.match(path) for p in UPLOADS):
        return UPLOAD_SLACK * upload + MULTIPART_OVERHEAD
    return default


class BodyLimit:
    def __init__(self, app: ASGIApp, limit: Callable[[str], int]) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit(str(scope.get("path", "")))
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            await _refuse(send, limit)
            return
        seen = 0
        started = False

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise BodyTooLarge(limit)
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except BodyTooLarge:
            if started:
                raise
            await _refuse(send, limit)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _refuse(send: Send, limit: int) -> None:
    message = f"the request body is over the {limit}-byte limit of this route"
    payload: dict[str, Any] = body("too_large", message)
    data = json.dumps(payload).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(data)).encode()),
    ]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": data})
