"""Server-sent events of an OpenAI-compatible chat completion, decoded into stream items.

The event stream itself (lines split only at CR/LF, multi-byte characters cut across network
reads, fields, comments) is `httpx-sse`'s; what follows is pure and incremental: event data
in, `StreamDelta`s out, then one `FinalMessage`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
from httpx_sse import EventSource, SSEError

from tavern_llm.base import (
    FinalMessage,
    ProviderError,
    StreamDelta,
    ToolCallDelta,
    Usage,
    assemble,
)
from tavern_llm.failures import error_for_chunk

DONE = "[DONE]"


async def event_data(response: httpx.Response) -> AsyncIterator[str]:
    """The data of each event of an event-stream response, in order. An event without data is
    not dispatched (as the SSE spec says), nor is one the server never ended with a blank line.
    A response that is not an event stream is `malformed`."""
    try:
        async for event in EventSource(response).aiter_sse():
            if event.data:
                yield event.data
    except SSEError as exc:
        raise ProviderError("malformed", f"not an event stream: {exc}") from None


@dataclass(frozen=True)
class ChunkParts:
    delta: StreamDelta | None
    finish_reason: str | None
    usage: Usage | None


def arguments_text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value)


def _tool_delta(raw: dict[str, Any], position: int) -> ToolCallDelta:
    function = raw.get("function") or {}
    index = raw.get("index")
    return ToolCallDelta(
        index=index if isinstance(index, int) else position,
        id=raw.get("id") or None,
        name=function.get("name") or None,
        arguments_delta=arguments_text(function.get("arguments")),
    )


def parse_usage(raw: Any) -> Usage | None:
    """OpenAI's usage, with its details: cached prompt tokens (`prompt_tokens_details`, or
    DeepSeek's `prompt_cache_hit_tokens`) and reasoning tokens (`completion_tokens_details`)."""
    if not isinstance(raw, dict):
        return None
    prompt = int(raw.get("prompt_tokens") or 0)
    completion = int(raw.get("completion_tokens") or 0)
    total = int(raw.get("total_tokens") or prompt + completion)
    cached = _detail(raw, "prompt_tokens_details", "cached_tokens")
    if cached is None:
        cached = _count(raw.get("prompt_cache_hit_tokens"))
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=total,
        cached_tokens=cached,
        reasoning_tokens=_detail(raw, "completion_tokens_details", "reasoning_tokens"),
    )


def _detail(raw: dict[str, Any], section: str, key: str) -> int | None:
    details = raw.get(section)
    return _count(details.get(key)) if isinstance(details, dict) else None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def parse_chunk(chunk: dict[str, Any]) -> ChunkParts:
    """One `chat.completion.chunk`: its delta (None when empty), finish reason and usage.

    Reasoning is `reasoning_content` (DeepSeek) or `reasoning` (vLLM, OpenRouter).
    """
    choices = chunk.get("choices") or []
    choice = choices[0] if choices and isinstance(choices[0], dict) else {}
    raw = choice.get("delta") or {}
    delta = StreamDelta(
        text=raw.get("content") or "",
        reasoning=raw.get("reasoning_content") or raw.get("reasoning") or "",
        tool_calls=tuple(_tool_delta(t, i) for i, t in enumerate(raw.get("tool_calls") or [])),
    )
    empty = not (delta.text or delta.reasoning or delta.tool_calls)
    return ChunkParts(
        delta=None if empty else delta,
        finish_reason=choice.get("finish_reason") or None,
        usage=parse_usage(chunk.get("usage")),
    )


class CompletionStream:
    """The state of one streamed completion: feed event data, collect deltas, finish."""

    def __init__(self) -> None:
        self.deltas: list[StreamDelta] = []
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.done = False

    @property
    def complete(self) -> bool:
        """`[DONE]` arrived, or a finish reason did (some servers never send `[DONE]`)."""
        return self.done or self.finish_reason is not None

    def feed(self, data: str) -> StreamDelta | None:
        """Take one event's data; return the delta to pass on, if any."""
        if data.strip() == DONE:
            self.done = True
            return None
        chunk = _decode_chunk(data)
        if "error" in chunk:
            raise error_for_chunk(chunk)
        parts = parse_chunk(chunk)
        self.finish_reason = parts.finish_reason or self.finish_reason
        self.usage = parts.usage or self.usage
        if parts.delta is not None:
            self.deltas.append(parts.delta)
        return parts.delta

    def final(self, provider: str, model: str) -> FinalMessage:
        return assemble(
            self.deltas,
            finish_reason=self.finish_reason,
            usage=self.usage,
            provider=provider,
            model=model,
        )


def _decode_chunk(data: str) -> dict[str, Any]:
    try:
        chunk = json.loads(data)
    except ValueError:
        chunk = None
    if not isinstance(chunk, dict):
        raise ProviderError("malformed", f"malformed stream chunk ({len(data)} chars)")
    return chunk
