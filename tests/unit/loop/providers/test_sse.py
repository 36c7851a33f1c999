from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx
import pytest

from tavern_llm.base import ProviderError, StreamDelta, ToolCallDelta, Usage
from tavern_llm.sse import CompletionStream, event_data, parse_chunk


async def events_of(body: bytes, piece: int = 0) -> list[str]:
    """The event data of an event-stream body, sent whole or `piece` bytes at a time."""

    async def pieces() -> AsyncIterator[bytes]:
        for i in range(0, len(body), piece):
            yield body[i : i + piece]

    content: bytes | AsyncIterator[bytes] = pieces() if piece else body
    response = httpx.Response(200, headers={"content-type": "text/event-stream"}, content=content)
    return [data async for data in event_data(response)]


def feed_lines(lines: list[str]) -> list[str]:
    return asyncio.run(events_of("".join(f"{line}\n" for line in lines).encode()))


def test_sse_decoder_joins_data_lines_and_ignores_comments() -> None:
    lines = [
        ": keep-alive",
        "",
        "data: a",
        "data: b",
        "",
        "event: x",
        "data:c",
        "",
        "data: [DONE]",
        "",
    ]
    assert feed_lines(lines) == ["a\nb", "c", "[DONE]"]


def test_an_event_the_server_never_ended_is_not_dispatched() -> None:
    assert feed_lines(["data: a", "", "data: cut"]) == ["a"]


@pytest.mark.parametrize("piece", [1, 2, 3, 7])
def test_events_are_reassembled_byte_exact_from_any_split(piece: int) -> None:
    """Multi-byte characters and CRLF endings cut across reads come out whole; only CR and LF
    end a line (not U+2028 or the other characters `str.splitlines` splits at)."""
    text = "航海者 Ada ⛵ sails\u2028on\x1cweekends"
    body = f": ping\r\ndata: {text}\r\n\r\ndata: [DONE]\r\n\r\n".encode()
    assert asyncio.run(events_of(body, piece)) == [text, "[DONE]"]


def test_a_response_that_is_not_an_event_stream_is_malformed() -> None:
    response = httpx.Response(200, headers={"content-type": "text/html"}, content=b"<html>")

    async def read() -> list[str]:
        return [data async for data in event_data(response)]

    with pytest.raises(ProviderError) as caught:
        asyncio.run(read())
    assert caught.value.code == "malformed"


def test_parse_chunk_reads_text_reasoning_tool_calls_and_finish() -> None:
    chunk = {
        "choices": [
            {
                "delta": {
                    "content": "hi",
                    "reasoning_content": "hmm",
                    "tool_calls": [
                        {"index": 2, "id": "c", "function": {"name": "f", "arguments": "{"}}
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ]
    }
    parts = parse_chunk(chunk)
    assert parts.delta == StreamDelta("hi", "hmm", (ToolCallDelta(2, "c", "f", "{"),))
    assert (parts.finish_reason, parts.usage) == ("tool_calls", None)


def test_parse_chunk_treats_role_only_and_usage_only_chunks_as_no_delta() -> None:
    assert parse_chunk({"choices": [{"delta": {"role": "assistant", "content": ""}}]}).delta is None
    usage = parse_chunk({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4}})
    assert (usage.delta, usage.usage) == (None, Usage(3, 4, 7))


def test_parse_chunk_accepts_vllm_reasoning_and_object_arguments() -> None:
    raw = {"tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}], "reasoning": "r"}
    delta = parse_chunk({"choices": [{"delta": raw}]}).delta
    assert delta == StreamDelta("", "r", (ToolCallDelta(0, None, "f", '{"a": 1}'),))


def test_completion_stream_is_complete_on_done_or_finish_reason() -> None:
    stream = CompletionStream()
    stream.feed(json.dumps({"choices": [{"delta": {"content": "x"}}]}))
    assert not stream.complete
    stream.feed(json.dumps({"choices": [{"delta": {}, "finish_reason": "length"}]}))
    assert stream.complete
    final = stream.final("openai", "m")
    assert (final.content, final.finish_reason) == ("x", "length")


def test_completion_stream_rejects_malformed_chunks_and_raises_stream_errors() -> None:
    with pytest.raises(ProviderError) as malformed:
        CompletionStream().feed("{not json")
    assert malformed.value.code == "malformed"
    with pytest.raises(ProviderError) as overflow:
        CompletionStream().feed('{"error": {"message": "maximum context length exceeded"}}')
    assert overflow.value.code == "context_overflow"
