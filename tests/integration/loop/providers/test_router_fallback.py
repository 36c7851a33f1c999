"""Routing over real providers: fallback to the next target only before any output."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import aclosing

import pytest

from tavern_llm import (
    AttemptFailed,
    ChatRequest,
    Fallback,
    FinalMessage,
    LLMConfig,
    OpenAIProvider,
    ProviderError,
    ProviderRouter,
    StreamItem,
    build_router,
)
from tests.integration.loop.providers.openai_server import (
    OpenAIServer,
    Scripted,
    error,
    text_stream,
)
from tests.integration.loop.providers.test_openai_provider import fast_config

pytestmark = pytest.mark.integration

REQUEST = ChatRequest(model="ignored", messages=[{"role": "user", "content": "hello"}])


@pytest.fixture
async def servers() -> AsyncIterator[tuple[OpenAIServer, OpenAIServer]]:
    async with OpenAIServer() as first, OpenAIServer() as second:
        yield first, second


async def collect(router: ProviderRouter, task: str = "chat") -> list[StreamItem]:
    async with aclosing(router.stream(task, REQUEST)) as items:
        return [item async for item in items]


def two_targets(first: OpenAIServer, second: OpenAIServer) -> ProviderRouter:
    providers = {
        "primary": OpenAIProvider(fast_config(first.base_url, max_retries=1), name="primary"),
        "secondary": OpenAIProvider(fast_config(second.base_url), name="secondary"),
    }
    return ProviderRouter(providers, {"chat": ["primary:big-model", "secondary:small-model"]})


async def test_router_falls_back_when_first_target_keeps_answering_503(
    servers: tuple[OpenAIServer, OpenAIServer],
) -> None:
    first, second = servers
    first.repeat = error(503, {"error": {"message": "overloaded"}})
    second.enqueue(text_stream(["from ", "second"]))
    router = two_targets(first, second)
    final = (await collect(router))[-1]
    await router.aclose()
    assert isinstance(final, FinalMessage)
    assert (final.provider, final.model, final.content) == (
        "secondary",
        "small-model",
        "from second",
    )
    assert len(first.requests) == 2
    assert first.requests[0].body["model"] == "big-model"
    assert second.requests[0].body["model"] == "small-model"


async def test_router_does_not_fall_back_after_output(
    servers: tuple[OpenAIServer, OpenAIServer],
) -> None:
    first, second = servers
    first.enqueue(Scripted(events=text_stream(["partial ", "reply"]).events, cut_after=2))
    router = two_targets(first, second)
    with pytest.raises(ProviderError) as caught:
        await collect(router)
    await router.aclose()
    assert caught.value.code == "stream_cut"
    assert second.requests == []


async def test_router_does_not_fall_back_on_context_overflow(
    servers: tuple[OpenAIServer, OpenAIServer],
) -> None:
    first, second = servers
    first.enqueue(error(400, {"error": {"code": "context_length_exceeded", "message": "too long"}}))
    router = two_targets(first, second)
    with pytest.raises(ProviderError) as caught:
        await collect(router)
    await router.aclose()
    assert caught.value.code == "context_overflow"
    assert second.requests == []


async def test_unreachable_endpoint_falls_back_to_the_labelled_offline_provider() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = LLMConfig(
        base_url=f"http://127.0.0.1:{port}/v1",
        max_retries=0,
        routes={"chat": ["openai:deepseek-chat", "offline:offline-1"]},
    )
    router = build_router(config)
    final = (await collect(router))[-1]
    await router.aclose()
    assert isinstance(final, FinalMessage)
    assert (final.provider, final.model, final.offline) == ("offline", "offline-1", True)
    assert router.context_window("chat") == 128_000
    assert router.context_window("summarise") == 128_000


async def test_a_fallback_is_announced_with_the_target_it_hands_over_to(
    servers: tuple[OpenAIServer, OpenAIServer],
) -> None:
    first, second = servers
    first.repeat = error(503, {"error": {"message": "overloaded", "code": "overloaded"}})
    second.enqueue(text_stream(["from second"]))
    router = two_targets(first, second)
    items = await collect(router)
    await router.aclose()
    failed = [i for i in items if isinstance(i, AttemptFailed)]
    retry, handover = failed
    assert (retry.provider, retry.attempt, retry.fallback) == ("primary", 1, None)
    assert (handover.provider, handover.model, handover.attempt) == ("primary", "big-model", 2)
    assert (handover.code, handover.status, handover.provider_code) == (
        "unavailable",
        503,
        "overloaded",
    )
    assert handover.fallback == Fallback(provider="secondary", model="small-model", offline=False)


async def test_a_fallback_to_the_offline_stand_in_says_it_is_offline() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = LLMConfig(
        base_url=f"http://127.0.0.1:{port}/v1",
        max_retries=0,
        routes={"chat": ["openai:deepseek-chat", "offline:offline-1"]},
    )
    router = build_router(config)
    items = await collect(router)
    await router.aclose()
    (handover,) = [i for i in items if isinstance(i, AttemptFailed)]
    assert (handover.provider, handover.code) == ("openai", "unavailable")
    assert handover.fallback == Fallback(provider="offline", model="offline-1", offline=True)
