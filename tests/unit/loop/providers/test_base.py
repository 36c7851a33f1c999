from __future__ import annotations

import pytest

from tavern_llm.base import (
    ProviderError,
    StreamDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
    assemble,
    is_context_overflow,
)


def test_assemble_joins_text_and_keeps_reasoning_apart() -> None:
    final = assemble(
        [
            StreamDelta(reasoning="think "),
            StreamDelta(reasoning="hard"),
            StreamDelta(text="4"),
            StreamDelta(text="2"),
        ],
        usage=Usage(3, 2, 5),
        provider="openai",
        model="m",
    )
    assert (final.content, final.reasoning_content) == ("42", "think hard")
    assert (final.finish_reason, final.usage, final.offline) == ("stop", Usage(3, 2, 5), False)


def test_assemble_joins_tool_call_fragments_by_index_in_index_order() -> None:
    deltas = [
        StreamDelta(tool_calls=(ToolCallDelta(1, "call_b", "search", '{"q"'),)),
        StreamDelta(tool_calls=(ToolCallDelta(0, "call_a", "write", "{"),)),
        StreamDelta(
            tool_calls=(ToolCallDelta(1, None, None, ': "x"}'), ToolCallDelta(0, None, None, "}"))
        ),
    ]
    final = assemble(deltas)
    assert final.tool_calls == (
        ToolCall("call_a", "write", "{}"),
        ToolCall("call_b", "search", '{"q": "x"}'),
    )
    assert final.finish_reason == "tool_calls"


def test_assemble_takes_id_and_name_from_the_first_fragment_that_has_them() -> None:
    deltas = [
        StreamDelta(tool_calls=(ToolCallDelta(0, None, None, "{"),)),
        StreamDelta(tool_calls=(ToolCallDelta(0, "call_1", "late_name", ""),)),
        StreamDelta(tool_calls=(ToolCallDelta(0, "call_2", "other", "}"),)),
    ]
    assert assemble(deltas).tool_calls == (ToolCall("call_1", "late_name", "{}"),)


def test_assemble_names_a_call_without_id_by_its_index() -> None:
    final = assemble([StreamDelta(tool_calls=(ToolCallDelta(3, None, "ping", "{}"),))])
    assert final.tool_calls[0].id == "call_3"


def test_assemble_keeps_the_reported_finish_reason() -> None:
    assert assemble([StreamDelta(text="cut")], finish_reason="length").finish_reason == "length"


@pytest.mark.parametrize(
    "body",
    [
        {
            "error": {
                "code": "context_length_exceeded",
                "message": "x",
                "type": "invalid_request_error",
            }
        },
        {"error": {"message": "This model's maximum context length is 65536 tokens. However, ..."}},
        {"error": {"type": "exceed_context_size_error", "message": "request exceeds context size"}},
        "This model's maximum context length is 4096 tokens",
        {"message": "prompt is too long: 210000 tokens > 200000 maximum"},
    ],
)
def test_overflow_bodies_are_recognised(body: object) -> None:
    assert is_context_overflow(400, body)


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (400, {"error": {"code": "invalid_api_key", "message": "bad key"}}),
        (400, {"error": {"message": "tools[0].function.name is required"}}),
        (500, {"error": {"code": "context_length_exceeded"}}),
        (429, {"error": {"message": "maximum context length"}}),
    ],
)
def test_other_errors_are_not_overflow(status: int, body: object) -> None:
    assert not is_context_overflow(status, body)


@pytest.mark.parametrize(
    ("code", "retryable"),
    [
        ("rate_limited", True),
        ("timeout", True),
        ("server_error", True),
        ("unavailable", True),
        ("stream_cut", True),
        ("context_overflow", False),
        ("auth", False),
        ("bad_request", False),
    ],
)
def test_provider_error_retryable_follows_its_code(code: str, retryable: bool) -> None:
    error = ProviderError(code, "m", status=418)  # type: ignore[arg-type]
    assert (error.code, error.retryable, error.status) == (code, retryable, 418)
    assert error.as_dict() == {
        "code": code,
        "message": "m",
        "status": 418,
        "retry_after_s": None,
        "retryable": retryable,
    }


def test_provider_error_retryable_can_be_overridden() -> None:
    assert ProviderError("rate_limited", "quota", retryable=False).retryable is False
