"""The RPC guard's decisions: what a request may hold, and every failure as a reply of the
common error model."""

from __future__ import annotations

import importlib

import asyncpg
import pytest
from structlog.testing import capture_logs

from tavern_events.replies import ERROR_CODES, ErrorReply
from tavern_runtime import rpcguard
from tavern_runtime.errors import ConcurrencyConflict, PermanentError, TavernError, TransientError
from tavern_runtime.pgerrors import classify
from tavern_runtime.rpcguard import RpcLimits, check_body, failure_reply, hostile, normalised


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({"query": "a\x00b"}, "body.query"),
        ({"items": [{"text": ["ok", "\x00"]}]}, "body.items.0.text.1"),
        ({"ke\x00y": 1}, "a key"),
        ({"q": "lone \ud800 high"}, "lone surrogate"),
        ({"q": "lone \udfff low"}, "lone surrogate"),
        ({"\udc80": "x"}, "a key"),
    ],
)
def test_hostile_strings_are_found_with_where_they_are(body: object, where: str) -> None:
    problem = hostile(body)
    assert problem is not None
    assert where in problem


def test_ordinary_text_of_any_script_and_emoji_passes() -> None:
    body = {"q": "苏青 Привет 🙂 café", "list": [1, 2.5, None, True, {"k": "v"}]}
    assert hostile(body) is None


def test_nesting_beyond_the_limit_is_refused_and_at_the_limit_is_not() -> None:
    def deep(levels: int) -> object:
        value: object = []
        for _ in range(levels - 1):
            value = [value]
        return value

    assert hostile(deep(64), max_depth=64) is None
    problem = hostile(deep(65), max_depth=64)
    assert problem is not None
    assert "deeper than 64" in problem


def test_a_body_that_is_not_json_is_invalid_and_an_empty_one_passes() -> None:
    limits = RpcLimits()
    refused = check_body(b"\xff\xfe", b"\xff\xfe", limits)
    assert refused is not None
    assert refused["error"]["code"] == "invalid"
    assert check_body(b"", b"", limits) is None


def test_an_oversize_request_is_too_large_with_the_limit() -> None:
    limits = RpcLimits(max_request_bytes=1024)
    assert rpcguard.too_large(b"x" * 1024, limits) is None
    refused = rpcguard.too_large(b"x" * 1025, limits)
    assert refused is not None
    assert (refused["error"]["code"], refused["error"]["limit_bytes"]) == ("too_large", 1024)


def _postgres_error(cls: type[asyncpg.PostgresError], message: str) -> asyncpg.PostgresError:
    return cls(message)


@pytest.mark.parametrize(
    ("exc", "code", "retryable"),
    [
        (_postgres_error(asyncpg.CharacterNotInRepertoireError, "0x00"), "invalid", False),
        (_postgres_error(asyncpg.UntranslatableCharacterError, "\\u0000"), "invalid", False),
        (_postgres_error(asyncpg.StringDataRightTruncationError, "too long"), "invalid", False),
        (_postgres_error(asyncpg.CheckViolationError, "check"), "invalid", False),
        (_postgres_error(asyncpg.UniqueViolationError, "dup"), "invalid", False),
        (_postgres_error(asyncpg.ProgramLimitExceededError, "index row"), "invalid", False),
        (UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed"), "invalid", False),
        (_postgres_error(asyncpg.SerializationError, "retry"), "conflict", True),
        (_postgres_error(asyncpg.QueryCanceledError, "timeout"), "unavailable", True),
        (_postgres_error(asyncpg.TooManyConnectionsError, "full"), "unavailable", True),
        (ConnectionRefusedError("refused"), "unavailable", True),
        (TimeoutError(), "unavailable", True),
        (_postgres_error(asyncpg.AdminShutdownError, "shutting down"), "unavailable", True),
        (_postgres_error(asyncpg.DiskFullError, "disk full"), "unavailable", True),
        (_postgres_error(asyncpg.UndefinedTableError, "no table"), "internal", False),
    ],
)
def test_database_errors_are_data_errors_or_unavailable_by_what_they_mean(
    exc: BaseException, code: str, retryable: bool
) -> None:
    reply = failure_reply(exc)
    assert (reply["error"]["code"], reply["error"]["retryable"]) == (code, retryable)
    ErrorReply.model_validate(reply)


def test_a_bug_is_internal_without_its_text() -> None:
    reply = failure_reply(KeyError("password=hunter2"))
    assert reply == {"error": {"code": "internal", "message": "internal error", "retryable": False}}
    assert classify(KeyError("x")) is None


class _OldCode(PermanentError):
    code = "weird_old_code"


def test_errors_with_a_code_outside_the_model_map_to_their_kind_keeping_it_as_reason() -> None:
    reply = _OldCode("nope", field="x").as_reply()
    assert reply == {
        "error": {
            "code": "invalid",
            "message": "nope",
            "retryable": False,
            "reason": "weird_old_code",
            "field": "x",
        }
    }
    assert TransientError("away").as_reply()["error"]["retryable"] is True
    assert ConcurrencyConflict("again").as_reply()["error"]["code"] == "conflict"


def _every_subclass(cls: type[TavernError]) -> list[type[TavernError]]:
    found = []
    for sub in cls.__subclasses__():
        found += [sub, *_every_subclass(sub)]
    return found


SERVICE_ERRORS = (
    "tavern_ledger.errors",
    "tavern_ledger.toolcalls.errors",
    "tavern_projector.errors",
    "tavern_projector.runner",
    "tavern_consolidator.errors",
    "tavern_loop.tools.spillstore",
    "tavern_runtime.pg",
    "tavern_runtime.migrations",
    "tavern_runtime.rpc",
)


def test_every_error_of_every_service_answers_with_a_code_of_the_model() -> None:
    for module in SERVICE_ERRORS:
        importlib.import_module(module)
    classes = [c for c in _every_subclass(TavernError) if c.__module__.startswith("tavern_")]
    assert len(classes) > 20
    for cls in classes:
        if cls.__module__ == "tavern_llm.base":
            continue  # a provider's failure is recorded in turn/end, never an RPC reply
        assert cls.code in ERROR_CODES, cls
        assert cls.reason is None or (cls.reason.isidentifier() and cls.reason.islower()), cls


@pytest.mark.parametrize(
    ("reply", "code", "reason"),
    [
        ({"error": {"code": "bad_request", "message": "m"}}, "internal", "bad_request"),
        ({"error": {"code": "invalid", "message": "m"}}, "invalid", None),
        ({"error": "just text"}, "internal", None),
        (
            {"error": {"code": "unavailable", "message": "m"}, "current_revision": 3},
            "unavailable",
            None,
        ),
    ],
)
def test_a_handlers_own_error_reply_is_brought_into_the_model(
    reply: dict[str, object], code: str, reason: str | None
) -> None:
    fixed = ErrorReply.model_validate(normalised(reply)).error
    assert (fixed.code, fixed.reason) == (code, reason)
    assert isinstance(fixed.retryable, bool)


def test_a_result_is_passed_on_untouched() -> None:
    result = {"hits": [], "error_count": 0}
    assert normalised(result) is result


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({}, 25.0),
        (None, 25.0),
        ({"Tavern-Timeout-Ms": "5000"}, 4.0),
        ({"Tavern-Timeout-Ms": "60000"}, 25.0),
        ({"Tavern-Timeout-Ms": "soon"}, 25.0),
        ({"Tavern-Timeout-Ms": "-1"}, 25.0),
    ],
)
def test_the_deadline_is_the_services_or_less_when_the_caller_waits_less(
    headers: dict[str, str] | None, seconds: float
) -> None:
    assert rpcguard.deadline_s(headers, RpcLimits(deadline_s=25.0)) == pytest.approx(seconds)


# --- shedding under a flood -----------------------------------------------------------------


class _Sub:
    def __init__(self, subject: str, msgs: int, size: int) -> None:
        self.subject, self.pending_msgs, self.pending_bytes = subject, msgs, size


class _Client:
    def __init__(self, *subs: _Sub) -> None:
        self._subs = dict(enumerate(subs))


class _Raw:
    def __init__(self, client: object) -> None:
        self._client = client


def test_the_backlog_counts_only_the_rpc_subscriptions_of_the_connection() -> None:
    client = _Client(
        _Sub("tavern.rpc.ledger.recall", 3, 3_000_000),
        _Sub("tavern.rpc.ledger.memory.search", 1, 500),
        _Sub("_INBOX_ledger.abc", 50, 90_000_000),  # replies to its own requests: not a backlog
    )
    assert rpcguard.backlog_of(_Raw(client)) == rpcguard.Backlog(4, 3_000_500)
    assert rpcguard.backlog_of(object()) == rpcguard.Backlog()


def test_the_backlog_follows_subscriptions_made_and_dropped_after_the_first_request() -> None:
    recall = _Sub("tavern.rpc.ledger.recall", 2, 200)
    client = _Client(recall, _Sub("_INBOX_ledger.abc", 50, 9_000))
    assert rpcguard.backlog_of(_Raw(client)) == rpcguard.Backlog(2, 200)
    recall.pending_msgs, recall.pending_bytes = 7, 700  # the same subscription, fuller
    assert rpcguard.backlog_of(_Raw(client)) == rpcguard.Backlog(7, 700)
    client._subs[5] = _Sub("tavern.rpc.ledger.query", 1, 10)
    assert rpcguard.backlog_of(_Raw(client)) == rpcguard.Backlog(8, 710)
    del client._subs[0]
    assert rpcguard.backlog_of(_Raw(client)) == rpcguard.Backlog(1, 10)


def test_a_request_is_shed_busy_and_retryable_only_past_the_budget() -> None:
    limits = RpcLimits(max_backlog_bytes=10_000, max_backlog=5)
    assert rpcguard.shed(rpcguard.Backlog(5, 10_000), limits) is None
    for over in (rpcguard.Backlog(6, 0), rpcguard.Backlog(1, 10_001)):
        reply = rpcguard.shed(over, limits)
        assert reply is not None
        error = ErrorReply.model_validate(reply).error
        assert (error.code, error.retryable, error.reason) == ("unavailable", True, "busy")
        assert (error.model_extra or {})["retry_after_ms"] > 0


def test_subscriptions_hold_more_than_the_shedding_budget_so_nothing_is_dropped_silently() -> None:
    limits = RpcLimits(max_request_bytes=1024, max_backlog_bytes=10_000, max_backlog=5)
    pending = limits.subscription_pending
    assert pending["pending_bytes_limit"] > limits.max_backlog_bytes + limits.max_request_bytes
    assert pending["pending_msgs_limit"] > limits.max_backlog + 1


def test_shedding_is_logged_at_most_once_a_second() -> None:
    now = [100.0]
    counter = rpcguard.ShedCounter(clock=lambda: now[0])
    with capture_logs() as logs:
        for _ in range(50):
            counter.add("tavern.rpc.ledger.recall", rpcguard.Backlog(9, 9))
        now[0] += 1.5
        counter.add("tavern.rpc.ledger.recall", rpcguard.Backlog(9, 9))
    said = [e for e in logs if e["event"] == "rpc_shedding"]
    assert [e["shed"] for e in said] == [1, 51]
