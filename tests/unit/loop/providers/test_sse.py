from __future__ import annotations

import json

import pytest

from tavern_loop.providers.base import ProviderError, StreamDelta, ToolCallDelta, Usage
from tavern_loop.providers.sse import CompletionStream, SseDecoder, parse_chunk


def feed_lines(lines: list[str]) -> list[str]:
    decoder = SseDecoder()
    events = [e for line in lines if (e := decoder.feed(line)) is not None]
    tail = decoder.flush()
    return events + ([tail] if tail is not None else [])


def test_sse_decoder_joins_data_lines_and_ignores_comments() -> None:
    lines = [": keep-alive", "", "data: a", "data: b", "", "event: x", "data:c", "", "data: [DONE]"]
    assert feed_lines(lines) == ["a\nb", "c", "[DONE]"]


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
    assert malformed.value.code == "server_error"
    with pytest.raises(ProviderError) as overflow:
        CompletionStream().feed('{"error": {"message": "maximum context length exceeded"}}')
    assert overflow.value.code == "context_overflow"
