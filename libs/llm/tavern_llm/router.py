"""Per-task routes over providers: try each target in order, fall back only before any output.

`build_router(config)` is the one place that turns `LLMConfig` into providers and routes.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, replace

import httpx
import structlog

from tavern_llm.base import (
    AttemptFailed,
    ChatRequest,
    Fallback,
    Provider,
    ProviderError,
    StreamItem,
)
from tavern_llm.config import LLMConfig
from tavern_llm.offline import OfflineProvider
from tavern_llm.openai import OpenAIProvider
from tavern_runtime.errors import ConfigurationError

log = structlog.get_logger(__name__)

DEFAULT_TASK = "chat"


@dataclass(frozen=True)
class Target:
    provider: str
    model: str

    @classmethod
    def parse(cls, text: str) -> Target:
        """`provider:model`; the model may itself contain colons (Ollama's `llama3:8b`)."""
        provider, _, model = text.partition(":")
        if not provider or not model:
            raise ConfigurationError(f"route target {text!r} is not 'provider:model'")
        return cls(provider, model)

    def __str__(self) -> str:
        return f"{self.provider}:{self.model}"


def may_fall_back(error: ProviderError) -> bool:
    """A target that failed before any output hands over on transient failures only."""
    return error.retryable or error.code == "unavailable"


class ProviderRouter:
    """Streams a task's request from the first target of its route that answers.

    A task without a route of its own uses the `chat` route. Which target served is on the
    `FinalMessage` (`provider`, `model`, `offline`).
    """

    def __init__(self, providers: Mapping[str, Provider], routes: Mapping[str, Sequence[str]]):
        self._providers = dict(providers)
        self._routes = {task: tuple(map(Target.parse, ts)) for task, ts in routes.items()}
        for task, targets in self._routes.items():
            self._check_route(task, targets)

    def _check_route(self, task: str, targets: tuple[Target, ...]) -> None:
        if not targets:
            raise ConfigurationError(f"route {task!r} has no target")
        for target in targets:
            if target.provider not in self._providers:
                raise ConfigurationError(
                    f"route {task!r} names provider {target.provider!r}, which is not configured"
                )

    def targets(self, task: str) -> tuple[Target, ...]:
        route = self._routes.get(task) or self._routes.get(DEFAULT_TASK)
        if not route:
            raise ConfigurationError(f"no route for task {task!r} and no {DEFAULT_TASK!r} route")
        return route

    def provider(self, target: Target) -> Provider:
        return self._providers[target.provider]

    def context_window(self, task: str) -> int:
        """The context window of the task's first (preferred) target."""
        first = self.targets(task)[0]
        return self.provider(first).context_window(first.model)

    async def stream(self, task: str, request: ChatRequest) -> AsyncGenerator[StreamItem, None]:
        """Stream from the first target that gets a delta out; its model replaces request.model.

        A hand-over to the next target is announced by an `AttemptFailed` naming it."""
        targets = self.targets(task)
        for position, target in enumerate(targets, start=1):
            routed = replace(request, model=target.model, route=task)
            started, attempts = False, 1
            try:
                async with aclosing(self.provider(target).stream(routed)) as items:
                    async for item in items:
                        attempts += isinstance(item, AttemptFailed)
                        started = started or not isinstance(item, AttemptFailed)
                        yield item
                return
            except ProviderError as error:
                if started or position == len(targets) or not may_fall_back(error):
                    raise
                log.warning(
                    "llm_fallback",
                    task=task,
                    target=str(target),
                    code=error.code,
                    status=error.status,
                )
                yield self._handover(target, targets[position], error, attempts)

    def _handover(
        self, failed: Target, after: Target, error: ProviderError, attempt: int
    ) -> AttemptFailed:
        offline = self.provider(after).offline
        return AttemptFailed(
            provider=failed.provider,
            model=failed.model,
            attempt=attempt,
            code=error.code,
            message=error.message,
            status=error.status,
            provider_code=error.provider_code,
            fallback=Fallback(provider=after.provider, model=after.model, offline=offline),
        )

    async def aclose(self) -> None:
        """Close the providers that hold resources (HTTP clients)."""
        for provider in self._providers.values():
            closer = getattr(provider, "aclose", None)
            if closer is not None:
                await closer()


def build_router(config: LLMConfig, *, client: httpx.AsyncClient | None = None) -> ProviderRouter:
    """The offline provider always, the OpenAI-compatible one when `base_url` is set."""
    providers: dict[str, Provider] = {"offline": OfflineProvider(config.offline_words_per_s)}
    if config.base_url:
        providers["openai"] = OpenAIProvider(config, client=client)
    return ProviderRouter(providers, config.resolved_routes())
