"""Writers cannot build inconsistent payloads; shared parts behave as documented."""

from __future__ import annotations

from typing import Any

import pytest

from tavern_events.asset import content_hash_of
from tavern_events.context import ContextCompacted
from tavern_events.errors import ContractError
from tavern_events.message import UserMessage
from tavern_events.parts import Usage, finish_reason_of
from tavern_events.request import AgentRequest
from tavern_events.session import SessionBindingChanged
from tavern_events.tool import ToolResult
from tavern_events.union import decode
from tests.unit.events.goldens import golden


def _with_payload(event_type: str, **changes: Any) -> dict[str, Any]:
    data = golden(event_type)
    data["payload"] = {**data["payload"], **changes}
    return {k: v for k, v in data.items() if v is not None}


def _refused(event_type: str, match: str, **changes: Any) -> None:
    with pytest.raises(ContractError, match=match):
        decode(_with_payload(event_type, **changes))


def test_st_binding_refuses_a_context_mode() -> None:
    _refused("session/created", "st binding", architecture="st")


def test_fork_needs_both_parent_and_sequence() -> None:
    _refused("session/created", "forked_at_seq", parent_session_id="s_parent")


def test_binding_change_must_change_something() -> None:
    _refused(
        "session/binding-changed", "change something", to_context_mode="dsh-native", group=None
    )


def test_a_group_change_alone_is_a_change() -> None:
    event = decode(
        _with_payload("session/binding-changed", to_context_mode="dsh-native"),
        SessionBindingChanged,
    )
    assert event.payload.group is not None


def test_a_group_lists_each_member_once() -> None:
    group = golden("session/binding-changed")["payload"]["group"]
    twice = {**group, "members": [*group["members"], group["members"][0]]}
    _refused("session/binding-changed", "each member once", group=twice)


def test_a_disabled_member_is_a_member() -> None:
    group = golden("session/binding-changed")["payload"]["group"]
    _refused("session/binding-changed", "not in the group", group={**group, "disabled": ["x"]})


def test_offline_provider_must_be_labelled() -> None:
    _refused("agent/request", "offline", provider="offline", offline=False)


def test_offline_provider_with_label_is_accepted() -> None:
    data = _with_payload("agent/request", provider="offline", offline=True)
    assert decode(data, AgentRequest).payload.offline is True


def test_failed_tool_result_needs_an_error() -> None:
    _refused("tool/result", "error", ok=False)


def test_ok_tool_result_refuses_an_error() -> None:
    _refused("tool/result", "error", error={"code": "TOOL_TIMEOUT", "message": "timed out"})


def test_rejected_tool_result_carries_the_reason() -> None:
    error = {"code": "rejected", "message": "tool not allowed in this session"}
    data = _with_payload("tool/result", ok=False, error=error, content="Error: denied")
    result = decode(data, ToolResult).payload
    assert result.error is not None
    assert result.error.code == "rejected"


def test_rejected_turn_spent_no_step() -> None:
    _refused("turn/end", "rejected", outcome="rejected", steps=1)


def test_completed_turn_carries_no_error() -> None:
    _refused("turn/end", "no error", error={"code": "x", "message": "y"})


def test_summary_compaction_needs_a_summary() -> None:
    _refused("context/compacted", "summary", summary=None)


def test_prune_compaction_needs_pruned_calls_and_rule() -> None:
    _refused("context/compacted", "prune", strategy="prune")


def test_prune_compaction_is_accepted_with_its_rule() -> None:
    rule = {"threshold_chars": 8192, "head_chars": 4096, "tail_chars": 1024}
    data = _with_payload(
        "context/compacted", strategy="prune", pruned_call_ids=["call_1"], pruning=rule
    )
    pruning = decode(data, ContextCompacted).payload.pruning
    assert pruning is not None
    assert pruning.head_chars == 4096


def test_compaction_cannot_grow_the_context() -> None:
    _refused("context/compacted", "grow", tokens_after=60000)


def test_projection_must_include_required_seqs() -> None:
    _refused("request/projection", "required", required_seqs=[4, 9])


def test_projection_refuses_duplicate_seqs() -> None:
    _refused("request/projection", "distinct", included_seqs=[4, 4])


def test_evidence_state_change_must_change_state() -> None:
    _refused("evidence/state-changed", "change", to_state="quarantined")


def test_set_variable_has_a_revision() -> None:
    _refused("variable/changed", "revision", revision=None)


@pytest.mark.parametrize("name", ["1abc", "a b", "", "x" * 65])
def test_variable_name_is_restricted(name: str) -> None:
    _refused("variable/changed", "name", name=name)


def test_asset_hash_must_be_sha256_hex() -> None:
    _refused("asset/removed", "content_hash", content_hash="not-a-hash")


def test_asset_content_hash_ignores_key_order() -> None:
    assert content_hash_of({"a": 1, "b": [1, 2]}) == content_hash_of({"b": [1, 2], "a": 1})


def test_golden_asset_hash_matches_its_content() -> None:
    payload = golden("asset/imported")["payload"]
    assert content_hash_of(payload["content"]) == payload["content_hash"]


def test_usage_plus_adds_counts() -> None:
    a = Usage(prompt_tokens=10, completion_tokens=2, total_tokens=12, cached_tokens=4)
    b = Usage(prompt_tokens=5, completion_tokens=1, total_tokens=6)
    assert a.plus(b) == Usage(
        prompt_tokens=15, completion_tokens=3, total_tokens=18, cached_tokens=4
    )
    assert b.plus(b).cached_tokens is None


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, "stop"),
        ("stop", "stop"),
        ("tool_calls", "tool_calls"),
        ("function_call", "tool_calls"),
        ("max_tokens", "length"),
        ("LENGTH", "length"),
        ("something-new", "stop"),
    ],
)
def test_finish_reason_of_maps_provider_words(raw: str | None, expected: str) -> None:
    assert finish_reason_of(raw) == expected


@pytest.mark.parametrize(
    "source", ["host", "user", "tool:memory_write", "plugin:repeat-tool-reminder"]
)
def test_known_sources_are_accepted(source: str) -> None:
    assert decode({**golden("user/message"), "source": source}, UserMessage).source == source


@pytest.mark.parametrize("source", ["tool:", "robot", "plugin:a b"])
def test_unknown_sources_are_refused(source: str) -> None:
    with pytest.raises(ContractError, match="source"):
        decode({**golden("user/message"), "source": source})
