"""The OpenAI-compatible provider against a real HTTP server on loopback."""

from __future__ import annotations

import asyncio
import json
import random
import socket
import time
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import pytest
from structlog.testing import capture_logs

from tavern_llm import (
    AttemptFailed,
    ChatRequest,
    FinalMessage,
    LLMConfig,
    OpenAIProvider,
    ProviderError,
    StreamDelta,
    StreamItem,
)
from tests.integration.loop.providers.openai_server import (
    USAGE,
    OpenAIServer,
    Scripted,
    chunk,
    error,
    text_stream,
    tool_call_stream,
)
from tests.support import eventually

pytestmark = pytest.mark.integration

API_KEY = "sk-test-secret-0123456789"
REQUEST = ChatRequest(model="deepseek-chat", messages=[{"role": "user", "content": "hi"}])


@pytest.fixture
async def server() -> AsyncIterator[OpenAIServer]:
    async with OpenAIServer() as running:
        yield running


def fast_config(base_url: str, **overrides: Any) -> LLMConfig:
    """Real timeouts and retries, with backoff short enough for tests."""
    settings: dict[str, Any] = {
        "base_url": base_url,
        "api_key": API_KEY,
        "max_retries": 3,
        "backoff_base_s": 0.01,
        "backoff_max_s": 0.05,
        "timeout_read_s": 5.0,
        **overrides,
    }
    return LLMConfig(**settings)


_opened: list[OpenAIProvider] = []


def make_provider(base_url: str, **overrides: Any) -> OpenAIProvider:
    provider = OpenAIProvider(fast_config(base_url, **overrides), rng=random.Random(7))
    _opened.append(provider)
    return provider


@pytest.fixture(autouse=True)
async def close_providers() -> AsyncIterator[None]:
    yield
    while _opened:
        await _opened.pop().aclose()


async def collect(provider: OpenAIProvider, request: ChatRequest = REQUEST) -> list[StreamItem]:
    async with aclosing(provider.stream(request)) as items:
        return [item async for item in items]


async def drain(provider: OpenAIProvider, into: list[StreamItem]) -> None:
    """Collect into `into`, so a test can see what arrived before a failure."""
    async with aclosing(provider.stream(REQUEST)) as items:
        async for item in items:
            into.append(item)


def split(items: list[StreamItem]) -> tuple[list[StreamDelta], FinalMessage]:
    """The deltas and the final message (attempts that failed before output left out)."""
    *deltas, final = [i for i in items if not isinstance(i, AttemptFailed)]
    assert isinstance(final, FinalMessage)
    assert all(isinstance(d, StreamDelta) for d in deltas)
    return deltas, final  # type: ignore[return-value]


async def test_text_stream_yields_deltas_then_final_with_usage(server: OpenAIServer) -> None:
    server.enqueue(text_stream(["Hel", "lo ", "there"]))
    deltas, final = split(await collect(make_provider(server.base_url)))
    assert [d.text for d in deltas] == ["Hel", "lo ", "there"]
    assert final.content == "Hello there"
    assert final.finish_reason == "stop"
    assert (final.usage.prompt_tokens, final.usage.total_tokens) == (11, 18)  # type: ignore[union-attr]
    assert (final.provider, final.model, final.offline) == ("openai", "deepseek-chat", False)


async def test_request_is_streamed_with_usage_and_bearer_key(server: OpenAIServer) -> None:
    server.enqueue(text_stream(["ok"]))
    tools = [{"type": "function", "function": {"name": "memory_write", "parameters": {}}}]
    request = ChatRequest(model="m", messages=REQUEST.messages, tools=tools, max_tokens=64)
    await collect(make_provider(server.base_url), request)
    seen = server.requests[0]
    assert (seen.method, seen.path) == ("POST", "/v1/chat/completions")
    assert seen.headers["authorization"] == f"Bearer {API_KEY}"
    assert seen.body["stream"] is True
    assert seen.body["stream_options"] == {"include_usage": True}
    assert (seen.body["model"], seen.body["tools"], seen.body["max_tokens"]) == ("m", tools, 64)
    assert "temperature" not in seen.body


async def test_reasoning_content_is_kept_apart_from_text(server: OpenAIServer) -> None:
    server.enqueue(text_stream(["42"], reasoning=["Let me ", "think."]))
    deltas, final = split(await collect(make_provider(server.base_url)))
    assert [d.reasoning for d in deltas if d.reasoning] == ["Let me ", "think."]
    assert (final.content, final.reasoning_content) == ("42", "Let me think.")


async def test_tool_calls_split_over_many_chunks_are_joined(server: OpenAIServer) -> None:
    first = json.dumps({"content": "the user likes green tea", "tags": ["pref"]})
    server.enqueue(tool_call_stream([("call_a", "memory_write", first), ("call_b", "ping", "{}")]))
    deltas, final = split(await collect(make_provider(server.base_url)))
    assert len(deltas) > 10
    assert final.finish_reason == "tool_calls"
    assert [(c.id, c.name, c.arguments) for c in final.tool_calls] == [
        ("call_a", "memory_write", first),
        ("call_b", "ping", "{}"),
    ]


async def test_429_waits_for_retry_after_then_succeeds(server: OpenAIServer) -> None:
    limited = error(429, {"error": {"message": "slow down"}}, {"Retry-After": "1"})
    server.enqueue(limited, text_stream(["fine"]))
    started = time.monotonic()
    with capture_logs() as logs:
        _, final = split(await collect(make_provider(server.base_url)))
    assert final.content == "fine"
    assert time.monotonic() - started >= 0.95
    retry = next(e for e in logs if e["event"] == "llm_retry")
    assert (retry["status"], retry["attempt"], retry["delay_s"]) == (429, 1, 1.0)
    assert len(server.requests) == 2


async def test_retry_after_beyond_the_limit_fails_at_once(server: OpenAIServer) -> None:
    server.enqueue(error(429, {"error": {"message": "later"}}, {"Retry-After": "120"}))
    with pytest.raises(ProviderError) as caught:
        await collect(make_provider(server.base_url, retry_after_max_s=60))
    assert (caught.value.code, caught.value.retry_after_s, caught.value.retryable) == (
        "rate_limited",
        120.0,
        True,
    )
    assert len(server.requests) == 1


async def test_500_is_retried_with_backoff(server: OpenAIServer) -> None:
    server.enqueue(error(500, {"error": {"message": "boom"}}), text_stream(["after"]))
    _, final = split(await collect(make_provider(server.base_url)))
    assert final.content == "after"
    assert len(server.requests) == 2


async def test_persistent_5xx_gives_up_after_max_retries(server: OpenAIServer) -> None:
    server.repeat = error(502, {"error": {"message": "bad gateway"}})
    with pytest.raises(ProviderError) as caught:
        await collect(make_provider(server.base_url, max_retries=2))
    assert (caught.value.code, caught.value.status, caught.value.retryable) == (
        "server_error",
        502,
        True,
    )
    assert len(server.requests) == 3


async def test_cut_mid_stream_raises_stream_cut_without_replay(server: OpenAIServer) -> None:
    full = text_stream(["one ", "two ", "three"])
    server.enqueue(Scripted(events=full.events, cut_after=3))
    received: list[StreamItem] = []
    with pytest.raises(ProviderError) as caught:
        await drain(make_provider(server.base_url), received)
    assert caught.value.code == "stream_cut"
    assert [d.text for d in received if isinstance(d, StreamDelta)] == ["one ", "two "]
    assert len(server.requests) == 1


async def test_cut_before_any_delta_is_retried(server: OpenAIServer) -> None:
    full = text_stream(["whole"])
    server.enqueue(Scripted(events=full.events, cut_after=1), full)
    _, final = split(await collect(make_provider(server.base_url)))
    assert final.content == "whole"
    assert len(server.requests) == 2


async def test_context_overflow_400_is_not_retried(server: OpenAIServer) -> None:
    body = {
        "error": {
            "message": "This model's maximum context length is 65536 tokens. However, you "
            "requested 70000 tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
    }
    server.enqueue(error(400, body))
    with pytest.raises(ProviderError) as caught:
        await collect(make_provider(server.base_url))
    assert (caught.value.code, caught.value.retryable) == ("context_overflow", False)
    assert len(server.requests) == 1


async def test_bad_key_is_auth_error_and_never_logged(server: OpenAIServer) -> None:
    server.enqueue(
        error(500, {"error": {"message": "x"}}), error(401, {"error": {"message": "no"}})
    )
    with capture_logs() as logs, pytest.raises(ProviderError) as caught:
        await collect(make_provider(server.base_url))
    assert (caught.value.code, caught.value.retryable) == ("auth", False)
    assert {e["event"] for e in logs} >= {"llm_request", "llm_retry", "llm_failed"}
    assert API_KEY not in repr(logs)
    assert API_KEY not in str(caught.value.as_dict())


async def test_closing_the_stream_early_closes_the_connection(server: OpenAIServer) -> None:
    server.enqueue(text_stream([f"w{i} " for i in range(50)], delay_s=0.2))
    async with aclosing(make_provider(server.base_url).stream(REQUEST)) as items:
        async for item in items:
            assert isinstance(item, StreamDelta)
            break
    await eventually(lambda: server.disconnects == 1, timeout=3)


async def test_cancelling_the_consumer_task_closes_the_connection(server: OpenAIServer) -> None:
    server.enqueue(text_stream([f"w{i} " for i in range(50)], delay_s=0.2))
    first = asyncio.Event()

    async def consume() -> None:
        async for _ in make_provider(server.base_url).stream(REQUEST):
            first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await eventually(lambda: server.disconnects == 1, timeout=3)


async def test_silence_before_output_is_a_timeout(server: OpenAIServer) -> None:
    slow = text_stream(["late"])
    server.enqueue(Scripted(events=slow.events, pause_at=0, pause_s=2))
    with pytest.raises(ProviderError) as caught:
        await collect(make_provider(server.base_url, timeout_read_s=0.3, max_retries=0))
    assert (caught.value.code, caught.value.retryable) == ("timeout", True)


async def test_silence_mid_stream_is_a_stream_cut(server: OpenAIServer) -> None:
    stalls = text_stream(["a", "b"])
    server.enqueue(Scripted(events=stalls.events, pause_at=2, pause_s=2))
    received: list[StreamItem] = []
    with pytest.raises(ProviderError) as caught:
        await drain(make_provider(server.base_url, timeout_read_s=0.3), received)
    assert caught.value.code == "stream_cut"
    assert received == [StreamDelta(text="a")]
    assert len(server.requests) == 1


async def test_connection_refused_is_unavailable_after_retries() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with capture_logs() as logs, pytest.raises(ProviderError) as caught:
        await collect(make_provider(f"http://127.0.0.1:{port}/v1", max_retries=2))
    assert (caught.value.code, caught.value.retryable) == ("unavailable", True)
    assert [e["attempt"] for e in logs if e["event"] == "llm_retry"] == [1, 2]


async def test_a_non_streamed_json_reply_is_accepted(server: OpenAIServer) -> None:
    body = {
        "choices": [{"message": {"content": "whole", "tool_calls": []}, "finish_reason": "stop"}],
        "usage": USAGE,
    }
    server.enqueue(Scripted(body=json.dumps(body).encode()))
    deltas, final = split(await collect(make_provider(server.base_url)))
    assert [d.text for d in deltas] == ["whole"]
    assert (final.content, final.usage.total_tokens) == ("whole", 18)  # type: ignore[union-attr]


async def test_a_provider_error_that_echoes_the_key_is_scrubbed(server: OpenAIServer) -> None:
    other = "ghp_" + "a1b2c3d4e5" * 3
    echo = f"Incorrect API key provided: {API_KEY}; token {other} also refused"
    server.enqueue(error(401, {"error": {"message": echo}}))
    with capture_logs() as logs, pytest.raises(ProviderError) as caught:
        await collect(make_provider(server.base_url))
    message = caught.value.message
    assert "[redacted:api_key]" in message
    assert "[redacted:github_token]" in message
    for secret in (API_KEY, other):
        assert secret not in str(caught.value)
        assert secret not in repr(logs)


async def test_cached_and_reasoning_tokens_are_kept_in_usage(server: OpenAIServer) -> None:
    usage = {
        **USAGE,
        "prompt_tokens_details": {"cached_tokens": 8},
        "completion_tokens_details": {"reasoning_tokens": 5},
    }
    events = [chunk({"content": "ok"}), chunk(finish_reason="stop"), chunk(usage=usage), "[DONE]"]
    server.enqueue(Scripted(events=tuple(events)))
    _, final = split(await collect(make_provider(server.base_url)))
    assert final.usage is not None
    assert (final.usage.cached_tokens, final.usage.reasoning_tokens) == (8, 5)


async def test_deepseek_cache_hits_count_as_cached_tokens(server: OpenAIServer) -> None:
    usage = {**USAGE, "prompt_cache_hit_tokens": 6, "prompt_cache_miss_tokens": 5}
    events = [chunk({"content": "ok"}), chunk(finish_reason="stop"), chunk(usage=usage), "[DONE]"]
    server.enqueue(Scripted(events=tuple(events)))
    _, final = split(await collect(make_provider(server.base_url)))
    assert final.usage is not None
    assert (final.usage.cached_tokens, final.usage.reasoning_tokens) == (6, None)


async def test_each_retry_is_announced_with_its_attempt_and_reason(server: OpenAIServer) -> None:
    limited = error(429, {"error": {"message": "slow down", "code": "rate_limit_exceeded"}})
    server.enqueue(limited, error(502, {"error": {"message": "bad gateway"}}), text_stream(["ok"]))
    items = await collect(make_provider(server.base_url))
    failed = [i for i in items if isinstance(i, AttemptFailed)]
    assert [(f.attempt, f.code, f.status) for f in failed] == [
        (1, "rate_limited", 429),
        (2, "server_error", 502),
    ]
    assert failed[0].provider_code == "rate_limit_exceeded"
    assert failed[0].message == "HTTP 429: slow down"
    assert all(f.delay_s is not None and f.delay_s > 0 for f in failed)
    assert all(f.fallback is None for f in failed)
    assert isinstance(items[-1], FinalMessage)
    assert items[-1].content == "ok"


async def test_the_providers_own_error_code_and_message_are_kept(server: OpenAIServer) -> None:
    body = {
        "error": {
            "message": "You exceeded your current quota, please check your plan.",
            "type": "insufficient_quota",
            "code": "insufficient_quota",
        }
    }
    server.enqueue(error(429, body))
    with pytest.raises(ProviderError) as caught:
        await collect(make_provider(server.base_url))
    error_ = caught.value
    assert (error_.code, error_.status, error_.provider_code) == (
        "rate_limited",
        429,
        "insufficient_quota",
    )
    assert error_.message == "HTTP 429: You exceeded your current quota, please check your plan."
    assert error_.as_dict()["provider_code"] == "insufficient_quota"
    assert len(server.requests) == 1, "a billing 429 is not retried"


async def test_a_malformed_chunk_after_output_is_reported_as_malformed(
    server: OpenAIServer,
) -> None:
    events = (chunk({"content": "half "}), "{this is not json", "[DONE]")
    server.enqueue(Scripted(events=events))
    received: list[StreamItem] = []
    with pytest.raises(ProviderError) as caught:
        await drain(make_provider(server.base_url), received)
    assert (caught.value.code, caught.value.after_output) == ("malformed", True)
    assert "malformed stream chunk" in caught.value.message
    assert "cut" not in caught.value.message
    assert received == [StreamDelta(text="half ")]
    assert len(server.requests) == 1


async def test_an_error_chunk_after_output_keeps_the_servers_message(server: OpenAIServer) -> None:
    failure = json.dumps({"error": {"message": "engine overloaded", "code": "engine_busy"}})
    server.enqueue(Scripted(events=(chunk({"content": "so far "}), failure)))
    with pytest.raises(ProviderError) as caught:
        await collect(make_provider(server.base_url))
    assert (caught.value.code, caught.value.provider_code) == ("server_error", "engine_busy")
    assert caught.value.message == "stream error: engine overloaded"
    assert caught.value.after_output


async def test_all_attempts_together_are_capped_by_max_wait(server: OpenAIServer) -> None:
    silent = Scripted(events=text_stream(["late"]).events, pause_at=0, pause_s=3)
    server.repeat = silent
    provider = make_provider(server.base_url, timeout_read_s=0.4, max_retries=10, max_wait_s=1.0)
    started = time.monotonic()
    with pytest.raises(ProviderError) as caught:
        await collect(provider)
    waited = time.monotonic() - started
    assert waited < 1.6, "ten retries of 0.4 s each would take over four seconds"
    assert caught.value.code == "timeout"
    assert 2 <= len(server.requests) <= 3


async def test_a_reply_slower_than_max_wait_fails_even_within_the_read_timeout(
    server: OpenAIServer,
) -> None:
    server.enqueue(Scripted(events=text_stream(["late"]).events, pause_at=0, pause_s=3))
    provider = make_provider(server.base_url, timeout_read_s=10, max_wait_s=0.5)
    started = time.monotonic()
    with pytest.raises(ProviderError) as caught:
        await collect(provider)
    assert time.monotonic() - started < 1.5
    assert caught.value.code == "timeout"
    assert "TAVERN_LLM_MAX_WAIT_S" in caught.value.message


def test_the_default_wait_cap_is_well_under_the_old_worst_case() -> None:
    config = LLMConfig()
    worst_case_before = (config.max_retries + 1) * config.timeout_read_s
    assert config.max_wait_s <= 120 < worst_case_before
