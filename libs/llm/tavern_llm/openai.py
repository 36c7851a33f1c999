"""OpenAI-compatible chat completions over httpx (DeepSeek, OpenAI, vLLM, Ollama, llama.cpp).

Streams SSE deltas; retries 429/5xx/connect failures with backoff, but only before the first delta,
and within `max_wait_s` in all. Each retry is announced in the stream (`AttemptFailed`).
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from datetime import UTC, datetime
from typing import Any

import httpx
import structlog

from tavern_llm.base import (
    AttemptFailed,
    ChatRequest,
    ProviderError,
    StreamDelta,
    StreamItem,
    ToolCallDelta,
    assemble,
)
from tavern_llm.config import LLMConfig
from tavern_llm.failures import error_for_response, retry_delay
from tavern_llm.sse import CompletionStream, arguments_text, event_data, parse_usage
from tavern_runtime.secretscan import redact_secrets

log = structlog.get_logger(__name__)

ERROR_BODY_LIMIT = 64 * 1024


def _utcnow() -> datetime:
    return datetime.now(UTC)


def request_body(request: ChatRequest) -> dict[str, Any]:
    """The JSON body of a streamed chat completion for `request`."""
    body: dict[str, Any] = {
        "model": request.model,
        "messages": request.messages,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        body["tools"] = request.tools
    if request.max_tokens is not None:
        body["max_tokens"] = request.max_tokens
    if request.temperature is not None:
        body["temperature"] = request.temperature
    return body


def transport_error(exc: Exception) -> ProviderError:
    """The provider error for an httpx failure (the adapter is the only place that sees them)."""
    if isinstance(exc, httpx.ConnectTimeout):
        return ProviderError("timeout", "connect timed out")
    if isinstance(exc, httpx.ConnectError):
        return ProviderError("unavailable", f"cannot connect: {type(exc).__name__}")
    if isinstance(exc, httpx.TimeoutException):
        return ProviderError("timeout", f"{type(exc).__name__}: no data within the read timeout")
    if isinstance(exc, httpx.ReadError | httpx.RemoteProtocolError):
        return ProviderError("stream_cut", f"connection lost: {type(exc).__name__}")
    if isinstance(exc, httpx.UnsupportedProtocol | httpx.InvalidURL):
        return ProviderError("bad_request", f"bad base_url: {exc}")
    return ProviderError("unavailable", f"transport failure: {type(exc).__name__}")


class OpenAIProvider:
    """One OpenAI-compatible endpoint (`{base_url}/chat/completions`).

    Pass a shared `httpx.AsyncClient` from the composition root, or let the provider own one
    (then `aclose()` it). `rng` and `clock` are injectable for tests.
    """

    offline = False

    def __init__(
        self,
        config: LLMConfig,
        *,
        name: str = "openai",
        client: httpx.AsyncClient | None = None,
        rng: random.Random | None = None,
        clock: Callable[[], datetime] = _utcnow,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self._config = config
        self._url = config.base_url.rstrip("/") + "/chat/completions"
        self._timeout = httpx.Timeout(
            config.timeout_read_s, connect=config.timeout_connect_s, pool=config.timeout_connect_s
        )
        self._owns_client = client is None
        self._client = client or httpx.AsyncClient()
        self._rng = rng or random.Random()
        self._clock = clock
        self._monotonic = monotonic

    def context_window(self, model: str) -> int:
        return self._config.context_window(model)

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()

    async def stream(self, request: ChatRequest) -> AsyncGenerator[StreamItem, None]:
        """Stream one reply. Failures before the first delta are retried (each announced by an
        `AttemptFailed`) until `max_wait_s` has passed; later ones raise."""
        body = request_body(request)
        attempts = self._config.max_retries + 1
        deadline = self._monotonic() + self._config.max_wait_s
        for attempt in range(1, attempts + 1):
            started = False
            try:
                async with aclosing(self._attempt(body, request.model, attempt)) as items:
                    first = await self._first(items, deadline, attempt)
                    if first is None:
                        return
                    started = True
                    yield first
                    async for item in items:
                        yield item
                return
            except ProviderError as raised:
                error = self._scrubbed(raised)
                if started:
                    raise self._after_output(error, request.model) from None
                delay = self._next_delay(error, attempt, attempts, deadline)
                if delay is None:
                    self._log_failure(error, request.model, attempt)
                    raise
                self._log_retry(error, request.model, attempt, delay)
                yield self._failed(error, request.model, attempt, delay)
                await asyncio.sleep(delay)

    async def _first(
        self, items: AsyncGenerator[StreamItem, None], deadline: float, attempt: int
    ) -> StreamItem | None:
        """The attempt's first item, unless the total wait runs out first."""
        remaining = deadline - self._monotonic()
        try:
            return await asyncio.wait_for(anext(items), max(remaining, 0.001))
        except StopAsyncIteration:
            return None
        except TimeoutError:
            wait = self._config.max_wait_s
            raise ProviderError(
                "timeout",
                f"no output within {wait:g} s over {attempt} attempt(s) (TAVERN_LLM_MAX_WAIT_S)",
            ) from None

    def _after_output(self, error: ProviderError, model: str) -> ProviderError:
        """A failure after deltas went out: the server's own error (an error chunk, a malformed
        chunk) is kept as it is; a broken or silent connection is a `stream_cut`."""
        self._log_cut(error, model)
        if error.code == "timeout":
            error = ProviderError("stream_cut", f"cut after output: {error.message}")
        error.after_output = True
        return error

    def _failed(
        self, error: ProviderError, model: str, attempt: int, delay: float
    ) -> AttemptFailed:
        return AttemptFailed(
            provider=self.name,
            model=model,
            attempt=attempt,
            code=error.code,
            message=error.message,
            status=error.status,
            provider_code=error.provider_code,
            delay_s=round(delay, 3),
        )

    async def _attempt(
        self, body: dict[str, Any], model: str, attempt: int
    ) -> AsyncGenerator[StreamItem, None]:
        log.info(
            "llm_request",
            provider=self.name,
            model=model,
            attempt=attempt,
            messages=len(body["messages"]),
            tools=len(body.get("tools", [])),
        )
        try:
            async with self._client.stream(
                "POST", self._url, json=body, headers=self._headers(), timeout=self._timeout
            ) as response:
                await self._raise_for_status(response)
                async with aclosing(self._items(response, model)) as items:
                    async for item in items:
                        yield item
        except (httpx.TransportError, httpx.InvalidURL) as exc:
            raise transport_error(exc) from exc

    def _scrubbed(self, error: ProviderError) -> ProviderError:
        """`error` without this provider's API key in its text (a server may echo it) and
        without anything else the credential patterns find."""
        key = self._config.api_key.get_secret_value()
        message = error.message.replace(key, "[redacted:api_key]") if key else error.message
        error.message = redact_secrets(message)
        error.args = (error.message,)
        return error

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "text/event-stream"}
        key = self._config.api_key.get_secret_value()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    async def _raise_for_status(self, response: httpx.Response) -> None:
        if response.is_success:
            return
        raw = bytearray()
        async for piece in response.aiter_bytes():
            raw += piece
            if len(raw) >= ERROR_BODY_LIMIT:
                break
        text = raw[:ERROR_BODY_LIMIT].decode("utf-8", errors="replace")
        raise error_for_response(response.status_code, text, response.headers, self._clock())

    async def _items(
        self, response: httpx.Response, model: str
    ) -> AsyncGenerator[StreamItem, None]:
        if response.headers.get("content-type", "").startswith("application/json"):
            # A server (or proxy) that ignored `stream: true` answers with one whole completion.
            for item in _whole_completion(await response.aread(), self.name, model):
                yield item
            return
        completion = CompletionStream()
        async for data in event_data(response):
            delta = completion.feed(data)
            if delta is not None:
                yield delta
            if completion.done:
                break
        if not completion.complete:
            raise ProviderError("stream_cut", "the stream ended before the reply finished")
        final = completion.final(self.name, model)
        log.debug(
            "llm_response", provider=self.name, model=model, finish_reason=final.finish_reason
        )
        yield final

    def _next_delay(
        self, error: ProviderError, attempt: int, attempts: int, deadline: float
    ) -> float | None:
        """The wait before the next attempt, or None: give up (not retryable, out of attempts,
        or the wait would end past the deadline)."""
        config = self._config
        if not error.retryable or attempt >= attempts:
            return None
        if error.retry_after_s is not None and error.retry_after_s > config.retry_after_max_s:
            return None
        jitter = self._rng.random()
        delay = retry_delay(error, attempt, config.backoff_base_s, config.backoff_max_s, jitter)
        return delay if self._monotonic() + delay < deadline else None

    def _log_cut(self, error: ProviderError, model: str) -> None:
        log.warning("llm_stream_cut", provider=self.name, model=model, code=error.code)

    def _log_retry(self, error: ProviderError, model: str, attempt: int, delay: float) -> None:
        log.warning(
            "llm_retry",
            provider=self.name,
            model=model,
            code=error.code,
            status=error.status,
            attempt=attempt,
            delay_s=round(delay, 3),
        )

    def _log_failure(self, error: ProviderError, model: str, attempt: int) -> None:
        log.warning(
            "llm_failed",
            provider=self.name,
            model=model,
            code=error.code,
            status=error.status,
            attempt=attempt,
            retryable=error.retryable,
        )


def _whole_completion(raw: bytes, provider: str, model: str) -> list[StreamItem]:
    """A non-streamed `chat.completion` body as one delta and the final message."""
    try:
        body = json.loads(raw)
        choice = body["choices"][0]
        message = choice.get("message") or {}
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        raise ProviderError("server_error", "malformed completion body") from exc
    delta = StreamDelta(
        text=message.get("content") or "",
        reasoning=message.get("reasoning_content") or "",
        tool_calls=tuple(
            _whole_tool_call(i, c) for i, c in enumerate(message.get("tool_calls") or [])
        ),
    )
    final = assemble(
        [delta],
        finish_reason=choice.get("finish_reason"),
        usage=parse_usage(body.get("usage")),
        provider=provider,
        model=model,
    )
    return [delta, final]


def _whole_tool_call(index: int, call: dict[str, Any]) -> ToolCallDelta:
    function = call.get("function") or {}
    return ToolCallDelta(
        index=index,
        id=call.get("id"),
        name=function.get("name"),
        arguments_delta=arguments_text(function.get("arguments")),
    )
