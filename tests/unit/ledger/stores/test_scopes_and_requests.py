"""Scopes come from the binding; requests are strict; forged scope ids are found (pure)."""

from __future__ import annotations

import json

import pytest

from tavern_ledger.domain.scopes import (
    ScopeKey,
    Scopes,
    forged_claims,
    owns,
    readable_keys,
    scope_key,
)
from tavern_ledger.domain.store_requests import (
    MemoryWrite,
    VariablePatch,
    VariableSet,
    load_json,
    parse,
)
from tavern_ledger.toolcalls.errors import Invalid, Malformed, ScopeUnavailable, TooLarge

SCOPES = Scopes(chat="chat_1", character="char_1", agent="s1")


def key(scope: str, *, turn: int = 3, global_enabled: bool = False) -> ScopeKey:
    return scope_key(SCOPES, scope, session_id="s1", turn=turn, global_enabled=global_enabled)


def test_scope_keys_come_from_the_binding() -> None:
    assert key("chat") == ScopeKey("chat", "chat_1")
    assert key("character") == ScopeKey("character", "char_1")
    assert key("agent") == ScopeKey("agent", "s1")
    assert key("turn") == ScopeKey("turn", "s1", 3)
    assert key("global", global_enabled=True) == ScopeKey("global", "global")


def test_global_scope_is_refused_unless_enabled() -> None:
    with pytest.raises(ScopeUnavailable, match="global"):
        key("global")
    assert ScopeKey("global", "global") not in readable_keys(SCOPES, global_enabled=False)


def test_a_session_without_character_has_no_character_scope() -> None:
    bare = Scopes(chat="c", character=None, agent="s")
    with pytest.raises(ScopeUnavailable, match="character"):
        scope_key(bare, "character", session_id="s", turn=1, global_enabled=False)
    assert [k.scope for k in readable_keys(bare, global_enabled=True)] == [
        "chat",
        "agent",
        "global",
    ]


def test_ownership_is_the_exact_scope_key() -> None:
    assert owns(SCOPES, ScopeKey("chat", "chat_1"), global_enabled=False)
    assert not owns(SCOPES, ScopeKey("chat", "chat_2"), global_enabled=False)
    assert not owns(SCOPES, ScopeKey("character", "chat_1"), global_enabled=False)


def test_forged_claims_name_only_foreign_ids() -> None:
    assert forged_claims(SCOPES, "chat", {"scope_id": None, "chat_id": None}) == {}
    assert forged_claims(SCOPES, "chat", {"scope_id": "chat_1", "chat_id": "chat_1"}) == {}
    assert forged_claims(SCOPES, "chat", {"scope_id": "chat_2"}) == {"scope_id": "chat_2"}
    assert forged_claims(SCOPES, "character", {"character_id": "char_9"}) == {
        "character_id": "char_9"
    }
    assert forged_claims(SCOPES, None, {"scope_id": "chat_1"}) == {"scope_id": "chat_1"}


def test_requests_refuse_unknown_fields_and_bad_shapes() -> None:
    with pytest.raises(Invalid, match=r"memory\.write"):
        parse(MemoryWrite, {"session_id": "s1", "scope": "chat", "content": "x", "evil": 1})
    with pytest.raises(Invalid, match="session_id"):
        parse(MemoryWrite, {"session_id": "s.1", "scope": "chat", "content": "x"})
    with pytest.raises(Invalid):
        parse(MemoryWrite, {"session_id": "s1", "scope": "turn", "content": "x"})
    with pytest.raises(Invalid):
        parse(MemoryWrite, {"session_id": "s1", "scope": "chat", "content": "x", "importance": 2})


def test_variable_set_needs_a_value_and_defaults_to_create_only() -> None:
    with pytest.raises(Invalid, match="value"):
        parse(VariableSet, {"session_id": "s1", "scope": "chat", "name": "a"})
    request = parse(VariableSet, {"session_id": "s1", "scope": "chat", "name": "a", "value": None})
    assert (request.value, request.expected_revision) == (None, 0)


def test_a_patch_change_either_sets_or_deletes() -> None:
    base = {"session_id": "s1", "scope": "chat", "expected_revision": 0}
    with pytest.raises(Invalid, match="either sets"):
        parse(VariablePatch, {**base, "changes": [{"name": "a"}]})
    with pytest.raises(Invalid, match="either sets"):
        parse(VariablePatch, {**base, "changes": [{"name": "a", "value": 1, "delete": True}]})
    with pytest.raises(Invalid):
        parse(VariablePatch, {**base, "changes": []})
    ok = parse(VariablePatch, {**base, "changes": [{"name": "a", "delete": True}]})
    assert ok.changes[0].delete


def test_raw_requests_are_size_checked_json_objects() -> None:
    assert load_json(b'{"a": 1}', 100) == {"a": 1}
    with pytest.raises(TooLarge, match="limit is 10"):
        load_json(json.dumps({"a": "x" * 20}).encode(), 10)
    with pytest.raises(Malformed, match="not JSON"):
        load_json(b"{oops", 100)
    with pytest.raises(Malformed, match="not JSON"):
        load_json(b'{"a": NaN}', 100)
    with pytest.raises(Malformed, match="object"):
        load_json(b"[1]", 100)
