"""The body limit as a pure ASGI middleware: what it lets through, and what it refuses before
the app has parsed anything (declared, undeclared and lying lengths)."""

from __future__ import annotations

import json
from typing import Any

from starlette.types import Message, Receive, Scope, Send

from tavern_gateway import limits

CHUNK = b"x" * 1000


class Reader:
    """An app that reads its whole body, then answers 200 with its length."""

    def __init__(self) -> None:
        self.called = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.called = True
        size = 0
        while True:
            message = await receive()
            size += len(message.get("body", b""))
            if not message.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": str(size).encode()})


async def _call(
    path: str, chunks: int, declared: int | None, app: Reader
) -> tuple[list[Message], int]:
    headers = [] if declared is None else [(b"content-length", str(declared).encode())]
    scope: dict[str, Any] = {"type": "http", "path": path, "method": "POST", "headers": headers}
    pulled = 0

    async def receive() -> Message:
        nonlocal pulled
        pulled += 1
        return {"type": "http.request", "body": CHUNK, "more_body": pulled < chunks}

    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    limit = limits.BodyLimit(app, lambda p: limits.limit_for(p, default=10_000, upload=50_000))
    await limit(scope, receive, send)
    return sent, pulled


def _error(sent: list[Message]) -> dict[str, Any]:
    assert sent[0]["status"] == 413
    found: dict[str, Any] = json.loads(sent[1]["body"])["error"]
    return found


async def test_a_body_within_the_limit_reaches_the_app() -> None:
    sent, _ = await _call("/api/login", 10, 10_000, Reader())
    assert sent[0]["status"] == 200
    assert sent[1]["body"] == b"10000"


async def test_a_declared_length_over_the_limit_is_refused_before_a_byte_is_read() -> None:
    app = Reader()
    sent, pulled = await _call("/api/login", 100_000, 100_000_000, app)
    assert _error(sent)["code"] == "too_large"
    assert (pulled, app.called) == (0, False)


async def test_a_body_without_a_length_is_cut_off_at_the_first_chunk_past_the_limit() -> None:
    sent, pulled = await _call("/api/login", 100_000, None, Reader())
    assert _error(sent) == {
        "code": "too_large",
        "message": "the request body is over the 10000-byte limit of this route",
        "retryable": False,
    }
    assert pulled == 11


async def test_a_body_longer_than_its_declared_length_is_cut_off_too() -> None:
    sent, pulled = await _call("/api/login", 100_000, 10, Reader())
    assert _error(sent)["code"] == "too_large"
    assert pulled == 11


async def test_an_upload_route_takes_its_larger_limit_and_no_more() -> None:
    sent, _ = await _call("/api/assets", 50, None, Reader())
    assert sent[0]["status"] == 200
    path = "/api/sessions/s-1/memory/import"
    over = (2 * 50_000 + limits.MULTIPART_OVERHEAD) // len(CHUNK) + 1
    sent, pulled = await _call(path, 100_000, None, Reader())
    assert _error(sent)["code"] == "too_large"
    assert pulled == over
