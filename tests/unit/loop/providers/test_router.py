"""Routing decisions over in-memory providers (the HTTP side is in the integration tests)."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing

import pytest

from tavern_llm.base import (
    ChatRequest,
    FinalMessage,
    ProviderError,
    StreamDelta,
    StreamItem,
    assemble,
)
from tavern_llm.config import LLMConfig
from tavern_llm.offline import OfflineProvider
from tavern_llm.router import ProviderRouter, Target, build_router
from tavern_runtime.errors import ConfigurationError

REQUEST = ChatRequest(model="whatever", messages=[{"role": "user", "content": "hi"}])


class Scripted:
    """Fails with `error` after yielding `before` deltas, or replies "<name> ok"."""

    offline = False

    def __init__(self, name: str, error: ProviderError | None = None, before: int = 0) -> None:
        self.name, self.error, self.before = name, error, before
        self.models: list[str] = []
        self.closed = False

    def context_window(self, model: str) -> int:
        return len(model) * 1000

    async def stream(self, request: ChatRequest) -> AsyncGenerator[StreamItem, None]:
        self.models.append(request.model)
        try:
            for i in range(self.before):
                yield StreamDelta(text=f"{i} ")
            if self.error is not None:
                raise self.error
            yield StreamDelta(text=f"{self.name} ok")
            yield assemble(
                [StreamDelta(text=f"{self.name} ok")], provider=self.name, model=request.model
            )
        finally:
            self.closed = True


async def run(router: ProviderRouter, task: str = "chat") -> list[StreamItem]:
    async with aclosing(router.stream(task, REQUEST)) as items:
        return [item async for item in items]


def route(first: Scripted, second: Scripted) -> ProviderRouter:
    return ProviderRouter({"a": first, "b": second}, {"chat": ["a:model-a", "b:model-bb"]})


@pytest.mark.parametrize("code", ["rate_limited", "server_error", "timeout", "unavailable"])
async def test_falls_back_when_the_first_target_fails_before_output(code: str) -> None:
    first, second = Scripted("a", ProviderError(code, "down")), Scripted("b")  # type: ignore[arg-type]
    final = (await run(route(first, second)))[-1]
    assert isinstance(final, FinalMessage)
    assert (final.provider, final.model) == ("b", "model-bb")
    assert (first.models, second.models) == (["model-a"], ["model-bb"])


@pytest.mark.parametrize("code", ["context_overflow", "auth", "bad_request"])
async def test_permanent_failures_do_not_fall_back(code: str) -> None:
    first, second = Scripted("a", ProviderError(code, "no")), Scripted("b")  # type: ignore[arg-type]
    with pytest.raises(ProviderError):
        await run(route(first, second))
    assert second.models == []


async def test_no_fallback_once_output_was_delivered() -> None:
    first = Scripted("a", ProviderError("stream_cut", "cut"), before=2)
    second = Scripted("b")
    with pytest.raises(ProviderError) as caught:
        await run(route(first, second))
    assert caught.value.code == "stream_cut"
    assert second.models == []


async def test_the_last_targets_error_is_raised_when_all_fail() -> None:
    first = Scripted("a", ProviderError("server_error", "a down"))
    second = Scripted("b", ProviderError("rate_limited", "b busy"))
    with pytest.raises(ProviderError) as caught:
        await run(route(first, second))
    assert caught.value.code == "rate_limited"


async def test_closing_the_router_stream_closes_the_provider_stream() -> None:
    first = Scripted("a", before=5)
    router = route(first, Scripted("b"))
    async with aclosing(router.stream("chat", REQUEST)) as items:
        async for _ in items:
            break
    assert first.closed


def test_tasks_without_a_route_use_the_chat_route_and_its_first_window() -> None:
    router = route(Scripted("a"), Scripted("b"))
    assert router.targets("distil") == (Target("a", "model-a"), Target("b", "model-bb"))
    assert router.context_window("summarise") == 7000


def test_a_route_naming_an_unknown_provider_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError):
        ProviderRouter({"offline": OfflineProvider()}, {"chat": ["openai:deepseek-chat"]})


def test_target_parse_keeps_colons_in_the_model() -> None:
    assert Target.parse("openai:llama3:8b") == Target("openai", "llama3:8b")
    assert str(Target("openai", "llama3:8b")) == "openai:llama3:8b"


async def test_build_router_without_base_url_serves_offline() -> None:
    router = build_router(LLMConfig(base_url="", routes={}))
    final = (await run(router, "distil"))[-1]
    assert isinstance(final, FinalMessage)
    assert (final.provider, final.model, final.offline) == ("offline", "offline-1", True)
    assert router.context_window("chat") == 32_768
    await router.aclose()
