"""A real HTTP/1.1 server on loopback that speaks the OpenAI chat-completions streaming format.

Each request takes the next scripted response: SSE streams (chunked, optionally slow or cut
off mid-way) or plain error replies. It records requests and notices client disconnects.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Scripted:
    """One response. `cut_after` closes the connection after that many events, mid-body;
    `delay_s` waits before every event, `pause_s` once more before event `pause_at`."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    events: tuple[str, ...] = ()
    delay_s: float = 0.0
    cut_after: int | None = None
    pause_at: int | None = None
    pause_s: float = 0.0

    @property
    def streamed(self) -> bool:
        return self.status == 200 and bool(self.events)


@dataclass(frozen=True)
class SeenRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


def chunk(
    delta: dict[str, Any] | None = None,
    finish_reason: str | None = None,
    usage: dict[str, Any] | None = None,
) -> str:
    """One `chat.completion.chunk` as SSE data; a usage-only chunk has no choices (as OpenAI)."""
    body: dict[str, Any] = {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "fake-model",
        "choices": [],
    }
    if delta is not None or finish_reason is not None:
        body["choices"] = [{"index": 0, "delta": delta or {}, "finish_reason": finish_reason}]
    if usage is not None:
        body["usage"] = usage
    return json.dumps(body)


USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}


def text_stream(
    pieces: list[str], *, reasoning: list[str] | None = None, delay_s: float = 0.0
) -> Scripted:
    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"reasoning_content": r, "content": None}) for r in reasoning or []]
    events += [chunk({"content": p}) for p in pieces]
    events += [chunk(finish_reason="stop"), chunk(usage=USAGE), "[DONE]"]
    return Scripted(events=tuple(events), delay_s=delay_s)


def tool_call_stream(calls: list[tuple[str, str, str]], piece: int = 3) -> Scripted:
    """Tool calls (id, name, arguments), each spread over many chunks of `piece` characters."""
    events = [chunk({"role": "assistant", "content": None})]
    for index, (call_id, name, arguments) in enumerate(calls):
        head = {"index": index, "id": call_id, "type": "function", "function": {"name": name}}
        events.append(
            chunk({"tool_calls": [{**head, "function": {"name": name, "arguments": ""}}]})
        )
        for start in range(0, len(arguments), piece):
            fragment = {"index": index, "function": {"arguments": arguments[start : start + piece]}}
            events.append(chunk({"tool_calls": [fragment]}))
    events += [chunk(finish_reason="tool_calls"), chunk(usage=USAGE), "[DONE]"]
    return Scripted(events=tuple(events))


def error(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> Scripted:
    return Scripted(status=status, body=json.dumps(body).encode(), headers=headers or {})


REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 429: "Too Many Requests"}


class OpenAIServer:
    """`async with OpenAIServer() as server:` serves on 127.0.0.1 at `server.base_url`."""

    def __init__(self) -> None:
        self.script: deque[Scripted] = deque()
        self.repeat: Scripted | None = None
        self.requests: list[SeenRequest] = []
        self.disconnects = 0
        self._server: asyncio.Server | None = None
        self.base_url = ""

    def enqueue(self, *responses: Scripted) -> None:
        self.script.extend(responses)

    async def __aenter__(self) -> OpenAIServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.base_url = f"http://127.0.0.1:{port}/v1"
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), 2)

    def _next(self) -> Scripted:
        if self.script:
            return self.script.popleft()
        assert self.repeat is not None, "the server got a request no script was written for"
        return self.repeat

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while (request := await _read_request(reader)) is not None:
                self.requests.append(request)
                if not await self._respond(self._next(), reader, writer):
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _respond(
        self, response: Scripted, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        """Write the response; False when the connection must close (cut, or client gone)."""
        if not response.streamed:
            writer.write(
                _head(response.status, response.headers, len(response.body)) + response.body
            )
            await writer.drain()
            return True
        writer.write(_head(200, {"Content-Type": "text/event-stream", **response.headers}, None))
        return await self._stream(response, reader, writer)

    async def _stream(
        self, response: Scripted, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        gone = asyncio.ensure_future(reader.read(1))  # the client sends nothing until we finish
        try:
            for sent, event in enumerate(response.events):
                if sent == response.cut_after:
                    return False
                wait = response.delay_s + (response.pause_s if sent == response.pause_at else 0)
                if wait and await _closed_within(gone, wait):
                    self.disconnects += 1
                    return False
                data = f"data: {event}\n\n".encode()
                writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                await writer.drain()
            writer.write(b"0\r\n\r\n")
            await writer.drain()
            return True
        except ConnectionError:
            self.disconnects += 1
            return False
        finally:
            gone.cancel()


async def _closed_within(gone: asyncio.Future[bytes], seconds: float) -> bool:
    done, _ = await asyncio.wait({gone}, timeout=seconds)
    return bool(done)


def _head(status: int, headers: dict[str, str], length: int | None) -> bytes:
    lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    if "content-type" not in {k.lower() for k in headers}:
        lines.append("Content-Type: application/json")
    lines.append("Transfer-Encoding: chunked" if length is None else f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def _read_request(reader: asyncio.StreamReader) -> SeenRequest | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    request_line, *header_lines = head.decode("latin-1").split("\r\n")
    method, path, _ = request_line.split(" ", 2)
    headers = {
        name.strip().lower(): value.strip()
        for name, _, value in (line.partition(":") for line in header_lines if line)
    }
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return SeenRequest(method, path, headers, json.loads(body) if body else {})
