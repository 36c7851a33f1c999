"""What a model request did, as the session log records it: retries and fallbacks, the offline
stand-in's label, a broken stream's partial reply, the server's own error, token details."""

from __future__ import annotations

import io
import json
import socket

import pytest

from tavern_cli.conversation import Renderer
from tavern_llm.offline import OfflineProvider
from tavern_llm.openai import OpenAIProvider
from tavern_llm.router import ProviderRouter
from tests.integration.loop.checks import of_type, one
from tests.integration.loop.conftest import LoopBus, openai_router
from tests.integration.loop.providers.openai_server import (
    USAGE,
    OpenAIServer,
    Scripted,
    chunk,
    error,
    text_stream,
)
from tests.integration.loop.providers.test_openai_provider import fast_config

pytestmark = pytest.mark.integration


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_a_retry_is_recorded_with_its_attempt_route_and_reason(bus: LoopBus) -> None:
    async with OpenAIServer() as server:
        limited = error(429, {"error": {"message": "slow down", "code": "rate_limit_exceeded"}})
        server.enqueue(limited, text_stream(["fine"]))
        await bus.engine(router=openai_router(server))
        await bus.say("s1", "hello")
        events = await bus.turns_ended("s1", 1)
    retry = one(events, "agent/retry")
    p = retry.payload
    assert (p.provider, p.model, p.route, p.attempt) == ("openai", "fake-model", "chat", 1)
    assert (p.reason, p.status, p.provider_code) == ("rate_limited", 429, "rate_limit_exceeded")
    assert p.message == "HTTP 429: slow down"
    assert p.delay_s is not None
    assert p.fallback is None
    assert len(of_type(events, "agent/request")) == 1, "a retry is not a new request"
    request = one(events, "agent/request")
    assert request.seq < retry.seq < one(events, "assistant/message").seq
    assert events[-1].payload.outcome == "completed"


async def test_a_fallback_to_the_offline_stand_in_is_recorded_and_labelled(bus: LoopBus) -> None:
    provider = OpenAIProvider(fast_config(f"http://127.0.0.1:{free_port()}/v1", max_retries=0))
    routes = {"chat": ["openai:fake-model", "offline:offline-1"], "summarise": ["offline:o"]}
    router = ProviderRouter({"openai": provider, "offline": OfflineProvider()}, routes)
    await bus.engine(router=router)
    await bus.say("s1", "hello")
    events = await bus.turns_ended("s1", 1)
    first, handed = of_type(events, "agent/request")
    assert (first.payload.provider, first.payload.offline) == ("openai", False)
    assert (handed.payload.provider, handed.payload.model) == ("offline", "offline-1")
    assert handed.payload.offline is True
    retry = one(events, "agent/retry").payload
    assert (retry.provider, retry.reason) == ("openai", "unavailable")
    assert retry.fallback is not None
    assert (retry.fallback.provider, retry.fallback.offline) == ("offline", True)
    answer = one(events, "assistant/message").payload
    assert (answer.provider, answer.model) == ("offline", "offline-1")
    assert first.seq < one(events, "agent/retry").seq < handed.seq

    out = io.StringIO()
    renderer = Renderer(out, colour=False)
    for event in events:
        renderer.render(event)
    shown = out.getvalue().splitlines()
    asking = [line for line in shown if "asking" in line]
    assert "openai:fake-model" in asking[0]
    assert "offline stand-in" in asking[-1]
    assert "fake-model" not in asking[-1]
    assert any("falling back to the offline stand-in model" in line for line in shown)


async def test_a_stream_cut_after_output_keeps_a_partial_reply(bus: LoopBus) -> None:
    async with OpenAIServer() as server:
        full = text_stream(["so far ", "so good ", "and then"])
        server.enqueue(Scripted(events=full.events, cut_after=3))
        await bus.engine(router=openai_router(server))
        await bus.say("s1", "tell me")
        events = await bus.turns_ended("s1", 1)
    answer = one(events, "assistant/message").payload
    assert (answer.partial, answer.finish_reason) == (True, "error")
    assert answer.content == "so far so good "
    assert answer.tool_calls == ()
    end = events[-1].payload
    assert (end.outcome, end.reason) == ("failed", "provider_stream_cut")
    assert end.error.code == "provider_stream_cut"


async def test_a_malformed_chunk_is_reported_as_malformed_not_as_a_cut(bus: LoopBus) -> None:
    async with OpenAIServer() as server:
        events_ = (chunk({"content": "half "}), "{not json at all", "[DONE]")
        server.enqueue(Scripted(events=events_))
        await bus.engine(router=openai_router(server))
        await bus.say("s1", "tell me")
        events = await bus.turns_ended("s1", 1)
    end = events[-1].payload
    assert (end.outcome, end.error.code) == ("failed", "provider_malformed")
    assert "malformed stream chunk" in end.error.message
    assert "cut" not in end.error.message
    answer = one(events, "assistant/message").payload
    assert (answer.partial, answer.content, answer.finish_reason) == (True, "half ", "error")


async def test_the_providers_own_error_code_and_message_reach_turn_end(bus: LoopBus) -> None:
    secret = "sk-live-" + "q7" * 16
    body = {
        "error": {
            "message": f"Incorrect API key provided: {secret}.",
            "type": "invalid_request_error",
            "code": "invalid_api_key",
        }
    }
    async with OpenAIServer() as server:
        server.enqueue(error(401, body))
        await bus.engine(router=openai_router(server))
        await bus.say("s1", "hello")
        events = await bus.turns_ended("s1", 1)
    failure = events[-1].payload.error
    assert (failure.code, failure.status, failure.provider_code) == (
        "provider_auth",
        401,
        "invalid_api_key",
    )
    assert failure.message.startswith("HTTP 401: Incorrect API key provided:")
    assert secret not in json.dumps(failure.model_dump())


async def test_cached_and_reasoning_tokens_are_kept_in_the_usage_of_record(bus: LoopBus) -> None:
    usage = {
        **USAGE,
        "prompt_tokens_details": {"cached_tokens": 4},
        "completion_tokens_details": {"reasoning_tokens": 3},
    }
    stream = (chunk({"content": "ok"}), chunk(finish_reason="stop"), chunk(usage=usage), "[DONE]")
    async with OpenAIServer() as server:
        server.enqueue(Scripted(events=stream))
        await bus.engine(router=openai_router(server))
        await bus.say("s1", "hello")
        events = await bus.turns_ended("s1", 1)
    for recorded in (
        one(events, "assistant/message").payload.usage,
        one(events, "step/end").payload.usage,
        events[-1].payload.usage,
    ):
        assert (recorded.cached_tokens, recorded.reasoning_tokens) == (4, 3)
        assert recorded.total_tokens == USAGE["total_tokens"]
