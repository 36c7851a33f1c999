"""Model requests over a real loopback HTTP server: retried 429s, context overflow recovery."""

from __future__ import annotations

import pytest

from tavern_loop.compaction import INSTRUCTION
from tavern_loop.domain.history import checkpoint_text
from tests.integration.loop.checks import check_requests, of_type, one
from tests.integration.loop.conftest import LoopBus, openai_router, sent, types
from tests.integration.loop.providers.openai_server import OpenAIServer, error, text_stream

pytestmark = pytest.mark.integration

OVERFLOW = error(
    400,
    {
        "error": {
            "message": "This model's maximum context length is 64 tokens.",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
    },
)


def chat_requests(server: OpenAIServer) -> list[list[dict[str, object]]]:
    """What the server got for `chat`, without the summariser's requests."""
    return [m for m in sent(server) if m[-1] != {"role": "user", "content": INSTRUCTION}]


async def test_a_rate_limited_request_is_retried_inside_one_agent_request(bus: LoopBus) -> None:
    async with OpenAIServer() as server:
        limited = error(429, {"error": {"message": "slow down"}}, {"retry-after-ms": "30"})
        server.enqueue(limited, text_stream(["all ", "good"]))
        await bus.engine(router=openai_router(server))
        await bus.say("s1", "hello")
        events = await bus.turns_ended("s1", 1)
    request = one(events, "agent/request")
    assert (request.payload.provider, request.payload.model) == ("openai", "fake-model")
    assert (request.payload.offline, request.payload.attempt) == (False, 1)
    answer = one(events, "assistant/message")
    assert (answer.payload.content, answer.payload.usage.total_tokens) == ("all good", 18)
    assert events[-1].payload.outcome == "completed"
    assert len(server.requests) == 2
    assert server.requests[0].body == server.requests[1].body
    check_requests(events, sent(server)[1:])


async def test_a_context_overflow_compacts_once_and_retries_once(bus: LoopBus) -> None:
    async with OpenAIServer() as server:
        server.enqueue(
            text_stream(["first answer, rather long so that it weighs something"]),
            text_stream(["second answer"]),
            OVERFLOW,
            text_stream(["a short summary"]),
            text_stream(["third answer"]),
        )
        await bus.engine(router=openai_router(server))
        for turn, text in enumerate(["first question " * 8, "second question", "third"], 1):
            await bus.say("s1", text)
            events = await bus.turns_ended("s1", turn)
    turn_three = [e for e in events if e.turn == 3]
    assert types(turn_three, lambda t: t == "assistant/chunk") == [
        "turn/start",
        "step/start",
        "user/message",
        "agent/request",
        "context/compacted",
        "agent/request",
        "assistant/message",
        "step/end",
        "turn/stopping",
        "turn/end",
    ]
    compacted = one(events, "context/compacted").payload
    first_answer = of_type(events, "assistant/message")[0]
    assert (compacted.strategy, compacted.trigger) == ("summary", "overflow")
    assert compacted.summary == "a short summary"
    assert compacted.replaces_through_seq == first_answer.seq
    assert compacted.tokens_after < compacted.tokens_before
    attempts = [e.payload.attempt for e in of_type(turn_three, "agent/request")]
    assert attempts == [1, 2]
    assert events[-1].payload.outcome == "completed"
    retried = sent(server)[-1]
    assert retried[1] == {"role": "user", "content": checkpoint_text("a short summary")}
    assert [m["content"] for m in retried[2:]] == ["second question", "second answer", "third"]
    assert len(server.requests) == 5
    check_requests(events, chat_requests(server))


async def test_a_context_overflow_with_nothing_to_compact_fails_the_turn(bus: LoopBus) -> None:
    async with OpenAIServer() as server:
        server.enqueue(OVERFLOW)
        await bus.engine(router=openai_router(server))
        await bus.say("s1", "a first question")
        events = await bus.turns_ended("s1", 1)
    assert len(server.requests) == 1, "no retry"
    assert of_type(events, "context/compacted") == []
    assert len(of_type(events, "agent/request")) == 1
    assert of_type(events, "assistant/message") == []
    end = events[-1].payload
    assert (end.outcome, end.reason, end.steps) == ("failed", "provider_context_overflow", 1)
    assert end.error.code == "provider_context_overflow"
    assert "maximum context length" in end.error.message
    assert one(events, "step/end").payload.finish_reason == "error"
