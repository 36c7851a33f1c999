"""The provider protocol: chat requests, stream items, the final message and provider errors.

Everything here is pure; adapters (OpenAI over httpx, the offline stand-in) implement `Provider`.
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from tavern_runtime.errors import TavernError

ErrorCode = Literal[
    "rate_limited",
    "context_overflow",
    "timeout",
    "server_error",
    "stream_cut",
    "auth",
    "bad_request",
    "unavailable",
    "malformed",
]
RETRYABLE_CODES: frozenset[str] = frozenset(
    {"rate_limited", "timeout", "server_error", "stream_cut", "unavailable", "malformed"}
)


@dataclass(frozen=True)
class ChatRequest:
    """One model request; `messages` and `tools` use the OpenAI chat shapes."""

    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)
    max_tokens: int | None = None
    temperature: float | None = None
    route: str = "chat"


@dataclass(frozen=True)
class ToolCallDelta:
    """A fragment of tool call `index`; `arguments_delta` is appended to its raw arguments."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments_delta: str = ""


@dataclass(frozen=True)
class StreamDelta:
    text: str = ""
    reasoning: str = ""
    tool_calls: tuple[ToolCallDelta, ...] = ()


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # raw, as the model wrote it: may be invalid JSON


@dataclass(frozen=True)
class Usage:
    """Token counts as reported. `cached_tokens` (prompt tokens served from the provider's
    cache) and `reasoning_tokens` (completion tokens spent thinking) are parts of the two
    totals, None when the provider does not say."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None


@dataclass(frozen=True)
class FinalMessage:
    """The last item of every stream: the whole reply and who served it."""

    content: str
    reasoning_content: str
    tool_calls: tuple[ToolCall, ...]
    usage: Usage | None
    finish_reason: str
    provider: str
    model: str
    offline: bool


@dataclass(frozen=True)
class AttemptFailed:
    """An attempt that failed before any output, and what follows it: a retry of the same
    target after `delay_s` (the provider), or the route's next target (the router, `fallback`).

    Consumers that only want the reply skip it; the loop records it (`agent/retry`).
    """

    provider: str
    model: str
    attempt: int
    code: str
    message: str
    status: int | None = None
    provider_code: str | None = None
    delay_s: float | None = None
    fallback: Fallback | None = None


@dataclass(frozen=True)
class Fallback:
    """The target a route hands a request over to."""

    provider: str
    model: str
    offline: bool


StreamItem = StreamDelta | FinalMessage | AttemptFailed


class Provider(Protocol):
    """A chat model behind a stream of deltas ending with exactly one `FinalMessage`.

    Consumers that stop early should close the stream (`contextlib.aclosing`) so the provider
    releases its connection at once instead of when the generator is collected.
    """

    name: str
    offline: bool

    def context_window(self, model: str) -> int: ...

    def stream(self, request: ChatRequest) -> AsyncGenerator[StreamItem, None]: ...


class ProviderError(TavernError):
    """A failed model request. `retryable` says whether the same request may succeed later.

    `stream_cut` means the connection broke (or fell silent) after deltas were delivered: a
    retry is a new request, never a resume. `malformed` means the server sent something that is
    not a chat completion chunk. `provider_code` is the server's own error code
    (`insufficient_quota`, `invalid_api_key`...), when it gave one. `after_output` says that
    deltas had already been delivered when the request failed.
    """

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        status: int | None = None,
        retry_after_s: float | None = None,
        retryable: bool | None = None,
        provider_code: str | None = None,
    ) -> None:
        retryable = code in RETRYABLE_CODES if retryable is None else retryable
        super().__init__(message, status=status, retry_after_s=retry_after_s, retryable=retryable)
        self.code = code
        self.status = status
        self.retry_after_s = retry_after_s
        self.retryable = retryable
        self.provider_code = provider_code
        self.after_output = False

    def as_dict(self) -> dict[str, Any]:
        """The provider's failure as recorded in `turn/end` (its own codes, not an RPC reply)."""
        return {
            "code": self.code,
            "message": self.message,
            **self.details,
            **({"provider_code": self.provider_code} if self.provider_code else {}),
        }


_OVERFLOW = re.compile(
    r"context[_ ]length|maximum context|context (?:size|window)|exceed_context|"
    r"prompt is too long|too many tokens",
    re.IGNORECASE,
)


def is_context_overflow(status: int, body: Any) -> bool:
    """Whether an error response says the prompt does not fit the model's context window.

    Recognises OpenAI/DeepSeek/vLLM (`context_length_exceeded`, "maximum context length") and
    llama.cpp (`exceed_context_size_error`) bodies; `body` is the decoded JSON or raw text.
    """
    if status not in (400, 413, 422):
        return False
    error = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(error, dict):
        fields = (error.get("code"), error.get("type"), error.get("message"))
        return any(isinstance(f, str) and _OVERFLOW.search(f) for f in fields)
    return isinstance(error, str) and bool(_OVERFLOW.search(error))


def assemble(
    deltas: Iterable[StreamDelta],
    *,
    finish_reason: str | None = None,
    usage: Usage | None = None,
    provider: str = "",
    model: str = "",
    offline: bool = False,
) -> FinalMessage:
    """Join stream deltas into the final message; tool-call fragments are joined by index.

    Without a reported finish reason it is "tool_calls" when there are calls, else "stop".
    """
    deltas = list(deltas)
    calls = join_tool_calls(d for delta in deltas for d in delta.tool_calls)
    return FinalMessage(
        content="".join(d.text for d in deltas),
        reasoning_content="".join(d.reasoning for d in deltas),
        tool_calls=calls,
        usage=usage,
        finish_reason=finish_reason or ("tool_calls" if calls else "stop"),
        provider=provider,
        model=model,
        offline=offline,
    )


def join_tool_calls(fragments: Iterable[ToolCallDelta]) -> tuple[ToolCall, ...]:
    """Tool calls in index order; id and name come from the first fragment that has them."""
    ids: dict[int, str] = {}
    names: dict[int, str] = {}
    arguments: dict[int, list[str]] = {}
    for fragment in fragments:
        arguments.setdefault(fragment.index, []).append(fragment.arguments_delta)
        if fragment.id and fragment.index not in ids:
            ids[fragment.index] = fragment.id
        if fragment.name and fragment.index not in names:
            names[fragment.index] = fragment.name
    return tuple(
        ToolCall(
            id=ids.get(index, f"call_{index}"),
            name=names.get(index, ""),
            arguments="".join(arguments[index]),
        )
        for index in sorted(arguments)
    )
