"""The distillation model behind the `distil` route of the LLM router: one attempt is one
completion, classified as distilled, rejected (truncated/invalid), failed, or unreachable."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from contextlib import aclosing

from tavern_consolidator.domain.distil import Attempt, Rejected, parse
from tavern_llm import ChatRequest, FinalMessage, ProviderError, ProviderRouter
from tavern_runtime.logs import get_logger
from tavern_runtime.secretscan import redact_secrets

log = get_logger(__name__)

TASK = "distil"
TEMPERATURE = 0.2


def unreachable(error: ProviderError) -> bool:
    """No model answered at all (connection refused, DNS, transport), as opposed to a model
    that answered with an error."""
    return error.code == "unavailable" and error.status is None


class Model:
    def __init__(self, router: ProviderRouter, max_tokens: int, timeout_s: float) -> None:
        self._router, self._max_tokens, self._timeout = router, max_tokens, timeout_s

    @property
    def configured(self) -> bool:
        """A real model is routed for `distil` (the offline stand-in is not a model)."""
        return any(t.provider != "offline" for t in self._router.targets(TASK))

    async def attempt(self, messages: list[dict[str, str]], batch_ids: Sequence[str]) -> Attempt:
        try:
            final = await asyncio.wait_for(self._complete(messages), self._timeout)
        except ProviderError as exc:
            outcome = "unreachable" if unreachable(exc) else "failed"
            return Attempt(outcome, f"llm_call_failed: {exc.code}: {redact_secrets(exc.message)}")
        except TimeoutError:
            return Attempt("failed", f"llm_call_failed: no reply within {self._timeout}s")
        if final.offline:
            return Attempt("unreachable", "llm_call_failed: only the offline stand-in answered")
        parsed = parse(final.content, final.finish_reason, frozenset(batch_ids))
        if isinstance(parsed, Rejected):
            log.warning("distillation_rejected", reason=parsed.reason, detail=parsed.detail)
            return Attempt("rejected", parsed.error)
        return Attempt("ok", distilled=parsed)

    async def answer(self, messages: list[dict[str, str]], max_tokens: int) -> str:
        """One short completion (a claim's judgement), within the attempt's timeout; raises
        `ProviderError` (or `TimeoutError`) when no real model answered whole."""
        final = await asyncio.wait_for(self._complete(messages, max_tokens), self._timeout)
        if final.offline:
            raise ProviderError("unavailable", "only the offline stand-in answered")
        if final.finish_reason == "length":
            raise ProviderError("malformed", "the answer stopped at its output limit")
        return final.content

    async def _complete(
        self, messages: list[dict[str, str]], max_tokens: int | None = None
    ) -> FinalMessage:
        request = ChatRequest(
            model="",
            messages=list(messages),
            max_tokens=max_tokens or self._max_tokens,
            temperature=TEMPERATURE,
            route=TASK,
        )
        async with aclosing(self._router.stream(TASK, request)) as items:
            async for item in items:
                if isinstance(item, FinalMessage):
                    return item
        raise ProviderError("stream_cut", "the stream ended without a final message")

    async def aclose(self) -> None:
        await self._router.aclose()
