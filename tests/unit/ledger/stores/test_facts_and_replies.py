"""Facts of store changes have ids derived from the change; replies are structured (no IO)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from tavern_events.ledger import MemoryChanged, VariableChanged
from tavern_events.session import SessionBindingChanged, SessionCreated
from tavern_events.turn import TurnEnded
from tavern_events.union import decode, encode
from tavern_ledger.domain.bindings import ModeChange, TurnClosed, effect_of
from tavern_ledger.domain.scopes import Binding, ScopeKey
from tavern_ledger.domain.store_facts import Origin, memory_changed, variables_changed
from tavern_ledger.domain.store_limits import StoreLimits
from tavern_ledger.domain.store_ratelimit import RateLimiter, RatePolicy
from tavern_ledger.domain.store_requests import VariableGet
from tavern_ledger.domain.variables import Change, ScopeState, Stored, plan
from tavern_ledger.toolcalls import rpc
from tavern_ledger.toolcalls.context import StoreContext
from tavern_ledger.toolcalls.errors import RevisionConflict
from tavern_runtime import principals
from tavern_runtime.principals import Principal
from tests.unit.ledger.stores.test_memory_rules import record

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
ORIGIN = Origin("s1", "tool:memory_write", NOW)


def test_memory_fact_id_derives_from_id_and_revision() -> None:
    first = memory_changed(record(revision=2), "updated", ORIGIN)
    again = memory_changed(record(revision=2), "updated", ORIGIN)
    other = memory_changed(record(revision=3), "updated", ORIGIN)
    assert first.id == again.id != other.id
    assert (first.payload.revision, first.payload.previous_revision) == ("2", "1")
    assert decode(encode(first)) == first


def test_forgotten_and_quarantined_memory_facts_say_so() -> None:
    gone = memory_changed(record(state="forgotten", revision=2), "forgotten", ORIGIN)
    assert (gone.payload.content, gone.payload.state) == (None, "forgotten")
    held = memory_changed(record(state="quarantined"), "written", ORIGIN)
    assert held.payload.state == "quarantined"


def test_variable_facts_one_per_variable_at_the_plan_revision() -> None:
    stored = {"b": Stored("b", 4, 2)}
    changes = [Change("a", {"x": 1}), Change("b", delete=True)]
    result = plan(ScopeState(4, 2), stored, changes, StoreLimits())
    facts = variables_changed(ScopeKey("turn", "s1", 2), result, ORIGIN)
    assert [(f.payload.name, f.payload.op, f.payload.revision) for f in facts] == [
        ("a", "set", "5"),
        ("b", "deleted", None),
    ]
    assert facts[1].payload.previous_revision == "4"
    assert all(isinstance(decode(encode(f)), VariableChanged) for f in facts)
    again = variables_changed(ScopeKey("turn", "s1", 2), result, ORIGIN)
    assert [f.id for f in facts] == [f.id for f in again]
    assert isinstance(memory_changed(record(), "written", ORIGIN), MemoryChanged)


def _session_event(model: Any, payload: dict[str, Any], **envelope: Any) -> Any:
    base = {"id": "e1", "session_id": "s1", "seq": 1, "ts": NOW}
    return model.model_validate({**base, **envelope, "payload": payload})


def test_session_events_become_bindings_mode_changes_and_closed_turns() -> None:
    created = _session_event(
        SessionCreated,
        {"architecture": "agent-tavern", "context_mode": "dsh-native", "chat_id": "c1"},
    )
    binding = effect_of(created)
    assert isinstance(binding, Binding)
    assert (binding.chat_id, binding.character_id, binding.agent_id, binding.updated_seq) == (
        "c1",
        None,
        "main",
        1,
    )
    changed = _session_event(
        SessionBindingChanged,
        {
            "from_architecture": "agent-tavern",
            "from_context_mode": "dsh-native",
            "to_architecture": "st",
        },
        seq=9,
    )
    assert effect_of(changed) == ModeChange("s1", "st", None, 9)
    ended = _session_event(TurnEnded, {"outcome": "completed", "steps": 1}, turn=4)
    assert effect_of(ended) == TurnClosed("s1", 4)
    assert effect_of(object()) is None


class Recorder:
    """An operation that answers with what it was asked, or raises what it is told to."""

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error

    async def __call__(self, ctx: StoreContext, req: VariableGet) -> dict[str, Any]:
        if self.error is not None:
            raise self.error
        return {"name": req.name, "pad": "x" * 300}


class Admitted:
    """Who asks is the operator, always allowed (the access checks have tests of their own)."""

    async def principal(self, headers: Mapping[str, str] | None, op: str) -> Principal:
        return principals.OPERATOR

    async def session(self, principal: Principal, session_id: str, op: str) -> None:
        return None


class AdmittedAs(Admitted):
    """Who asks is `who`, always allowed."""

    def __init__(self, who: Principal) -> None:
        self.who = who

    async def principal(self, headers: Mapping[str, str] | None, op: str) -> Principal:
        return self.who


async def _serve(
    op: rpc.Operation[Any],
    body: object,
    limiter: RateLimiter | None = None,
    access: Admitted | None = None,
) -> Any:
    ctx = StoreContext(pool=None, limits=StoreLimits(max_reply_bytes=1000))
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    limiter = limiter or RateLimiter(RatePolicy(100, 100))
    return await rpc.serve(ctx, limiter, op, data, access or Admitted(), None, clock=lambda: 0.0)


GET = {"session_id": "s1", "scope": "chat", "name": "hp"}


async def test_serve_answers_malformed_and_invalid_requests_with_structured_errors() -> None:
    op = rpc.Operation("variable.get", VariableGet, Recorder())
    malformed = (await _serve(op, b"{oops"))["error"]
    assert (malformed["code"], malformed["reason"], malformed["retryable"]) == (
        "invalid",
        "malformed",
        False,
    )
    assert (await _serve(op, {**GET, "extra": 1}))["error"]["code"] == "invalid"
    assert await _serve(op, GET) == {"name": "hp", "pad": "x" * 300}


async def test_serve_turns_a_conflict_into_an_error_with_the_current_revision() -> None:
    conflict = RevisionConflict("stale", current_revision=7)
    op = rpc.Operation("variable.get", VariableGet, Recorder(conflict))
    assert await _serve(op, GET) == {
        "error": {"code": "conflict", "message": "stale", "retryable": False, "current_revision": 7}
    }


async def test_serve_answers_a_crash_with_an_internal_error() -> None:
    crash = rpc.Operation("variable.get", VariableGet, Recorder(KeyError("bug")))
    assert (await _serve(crash, GET))["error"]["code"] == "internal"


async def test_serve_rate_limits_per_caller_and_session() -> None:
    op = rpc.Operation("variable.get", VariableGet, Recorder())
    limiter = RateLimiter(RatePolicy(rate_per_s=1, burst=1))
    assert "error" not in await _serve(op, GET, limiter)
    limited = await _serve(op, GET, limiter)
    assert limited["error"]["code"] == "rate_limited"
    assert (limited["error"]["retry_after_ms"], limited["error"]["retryable"]) == (1000, True)
    other = AdmittedAs(principals.user("mallory"))  # another caller naming the same session
    assert "error" not in await _serve(op, GET, limiter, other)


async def test_serve_refuses_results_over_the_reply_cap() -> None:
    class Big(Recorder):
        async def __call__(self, ctx: StoreContext, req: VariableGet) -> dict[str, Any]:
            return {"pad": "x" * 2000}

    reply = await _serve(rpc.Operation("variable.get", VariableGet, Big()), GET)
    assert reply["error"]["code"] == "too_large"
