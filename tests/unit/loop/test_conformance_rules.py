"""Pure rules behind the loop's conformance: follow-ups per turn, what a skipped compaction
says, and how a provider's usage details and error codes are read."""

from __future__ import annotations

from datetime import UTC, datetime

from tavern_events.input import (
    CancelInput,
    CommandInput,
    CommandInputPayload,
    MessageInput,
    MessageInputPayload,
)
from tavern_llm.failures import error_for_chunk, error_for_response, provider_code
from tavern_llm.sse import parse_usage
from tavern_loop.compaction import skipped
from tavern_loop.inputs import PendingInput
from tavern_loop.runner import choose_claim

NOW = datetime(2026, 3, 2, tzinfo=UTC)


def message(seq: int) -> PendingInput:
    command = MessageInput(
        input_id=f"m{seq}", session_id="s1", ts=NOW, payload=MessageInputPayload(text=f"hi {seq}")
    )
    return PendingInput(seq, command.input_id, "message", command)


def cancel(seq: int) -> PendingInput:
    return PendingInput(
        seq, f"c{seq}", "cancel", CancelInput(input_id=f"c{seq}", session_id="s1", ts=NOW)
    )


def compact(seq: int) -> PendingInput:
    payload = CommandInputPayload(name="compact")
    command = CommandInput(input_id=f"k{seq}", session_id="s1", ts=NOW, payload=payload)
    return PendingInput(seq, command.input_id, "command", command)


def ids(claim: list[PendingInput]) -> list[str]:
    return [p.input_id for p in claim]


def test_a_turn_claims_one_follow_up_by_default() -> None:
    waiting = [message(1), message(2), message(3)]
    assert ids(choose_claim(waiting, 32)) == ["m1"]
    assert ids(choose_claim(waiting, 32, messages=2)) == ["m1", "m2"]


def test_cancels_around_the_follow_up_are_claimed_with_it_but_not_the_next_message() -> None:
    """A cancel before it is stale; one right after it was meant for its turn."""
    claim = choose_claim([cancel(1), message(2), cancel(3), message(4)], 32)
    assert ids(claim) == ["c1", "m2", "c3"]


def test_a_command_is_still_claimed_alone() -> None:
    assert ids(choose_claim([compact(1), message(2)], 32)) == ["k1"]
    assert ids(choose_claim([message(1), compact(2)], 32, messages=4)) == ["m1"]


def test_each_skip_reason_has_words_for_the_user() -> None:
    nothing = skipped("command", "nothing_to_compact")
    assert nothing.detail.startswith("nothing to compact")
    larger = skipped("pressure", "not_smaller", "", 180, 212)
    assert "(212 tokens)" in larger.detail
    assert "(180 tokens)" in larger.detail
    busy = skipped("command", "busy")
    assert busy.detail.startswith("busy: a turn is running")
    failed = skipped("overflow", "failed", "token ghp_" + "a1b2c3d4e5" * 3 + " refused")
    assert "ghp_a1b2" not in failed.detail


def test_usage_details_are_read_from_openai_and_deepseek_shapes() -> None:
    openai = parse_usage(
        {
            "prompt_tokens": 10,
            "completion_tokens": 4,
            "total_tokens": 14,
            "prompt_tokens_details": {"cached_tokens": 6},
            "completion_tokens_details": {"reasoning_tokens": 2},
        }
    )
    assert openai is not None
    assert (openai.cached_tokens, openai.reasoning_tokens) == (6, 2)
    deepseek = parse_usage({"prompt_tokens": 10, "prompt_cache_hit_tokens": 7})
    assert deepseek is not None
    assert (deepseek.cached_tokens, deepseek.reasoning_tokens) == (7, None)
    plain = parse_usage({"prompt_tokens": 1, "prompt_tokens_details": {"cached_tokens": -1}})
    assert plain is not None
    assert plain.cached_tokens is None


def test_the_servers_own_error_code_is_kept() -> None:
    assert provider_code({"error": {"code": "invalid_api_key", "type": "x"}}) == "invalid_api_key"
    assert provider_code({"error": {"type": "server_error"}}) == "server_error"
    assert provider_code({"error": "plain text"}) is None
    quota = error_for_response(
        429, '{"error": {"message": "no quota", "code": "insufficient_quota"}}', {}, NOW
    )
    assert (quota.code, quota.provider_code, quota.retryable) == (
        "rate_limited",
        "insufficient_quota",
        False,
    )
    chunk = error_for_chunk({"error": {"message": "busy", "code": "engine_busy"}})
    assert (chunk.code, chunk.provider_code) == ("server_error", "engine_busy")
