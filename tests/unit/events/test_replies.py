"""The common error model of RPC replies."""

from __future__ import annotations

from tavern_events.replies import ERROR_CODES, ErrorReply, error_of, error_reply


def test_the_codes_include_the_refusals_of_principals() -> None:
    assert {"unauthenticated", "forbidden", "invalid", "not_found", "internal"} <= ERROR_CODES


def test_retryable_follows_the_code_unless_given() -> None:
    assert error_reply("unavailable", "away")["error"]["retryable"] is True
    assert error_reply("timeout", "late")["error"]["retryable"] is True
    assert error_reply("invalid", "bad")["error"]["retryable"] is False
    assert error_reply("not_found", "later", retryable=True)["error"]["retryable"] is True


def test_reason_and_details_ride_inside_the_error() -> None:
    reply = error_reply("conflict", "stale", reason="revision", current_revision=4)
    error = ErrorReply.model_validate(reply).error
    assert (error.code, error.reason, (error.model_extra or {})["current_revision"]) == (
        "conflict",
        "revision",
        4,
    )


def test_error_of_reads_errors_and_leaves_results() -> None:
    assert error_of({"hits": []}) is None
    assert error_of(["error"]) is None
    found = error_of(error_reply("forbidden", "not yours"))
    assert found is not None
    assert found.code == "forbidden"
    garbled = error_of({"error": {"code": "made_up", "message": "m"}})
    assert garbled is not None
    assert (garbled.code, garbled.message) == ("internal", "m")
