"""A loopback distillation model: the tests' OpenAI-compatible server, answering each request
from a script first, then from a responder that reads the evidence records in the prompt."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.integration.loop.providers.openai_server import (
    OpenAIServer,
    Scripted,
    SeenRequest,
    chunk,
    text_stream,
)

Responder = Callable[[list[dict[str, Any]]], Scripted]


def records_of(request: SeenRequest) -> list[dict[str, Any]]:
    """The evidence records the consolidator sent (`Evidence records (JSON):\\n[...]`)."""
    user = request.body["messages"][-1]["content"]
    found: list[dict[str, Any]] = json.loads(user.partition("\n")[2])
    return found


def reply(observations: list[dict[str, Any]], *, delay_s: float = 0.0) -> Scripted:
    return text_stream(
        [json.dumps({"observations": observations}, ensure_ascii=False)], delay_s=delay_s
    )


def one_per_domain(records: list[dict[str, Any]]) -> Scripted:
    """One observation per claim domain, citing every record of that domain."""
    by_domain: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_domain.setdefault(r["claimDomain"], []).append(r)
    return reply(
        [
            {
                "subject": "user",
                "predicate": f"states_{domain}",
                "claimDomain": domain,
                "text": rows[0]["content"][:100],
                "evidenceIds": [r["id"] for r in rows],
            }
            for domain, rows in by_domain.items()
        ]
    )


def truncated() -> Scripted:
    """A reply cut by the output limit: half a JSON object, finish_reason `length`."""
    events = [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": '{"observations":[{"subject":"user","predi'}),
        chunk(finish_reason="length"),
        "[DONE]",
    ]
    return Scripted(events=tuple(events))


class ModelServer(OpenAIServer):
    def __init__(self, responder: Responder = one_per_domain) -> None:
        super().__init__()
        self.responder = responder

    async def __aenter__(self) -> ModelServer:
        await super().__aenter__()
        return self

    def _next(self) -> Scripted:
        if self.script:
            return self.script.popleft()
        return self.responder(records_of(self.requests[-1]))

    @property
    def distil_requests(self) -> list[SeenRequest]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]
