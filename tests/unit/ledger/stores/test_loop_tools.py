"""The loop's memory and variable tools: schemas, forwarded arguments, results and failures.

The RPC is a recording fake here; the round trip against a running ledger is an integration
test (tests/integration/ledger/stores/test_loop_tools.py).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tavern_events.replies import error_reply
from tavern_loop.tools import ToolContext, ToolRegistry
from tavern_loop.tools.ledger_tools import camel, forwarded, ledger_tools

NAMES = [
    "memory_search",
    "memory_read",
    "memory_write",
    "memory_update",
    "memory_forget",
    "variable_get",
    "variable_set",
    "variable_patch",
    "variable_delete",
    "variable_list",
]


class FakeRpc:
    def __init__(self, reply: dict[str, Any]) -> None:
        self.reply = reply
        self.calls: list[tuple[str, dict[str, Any], float]] = []

    async def __call__(self, subject: str, payload: dict[str, Any], timeout: float) -> Any:
        self.calls.append((subject, payload, timeout))
        return self.reply


def context(rpc: FakeRpc) -> ToolContext:
    return ToolContext(
        session_id="s1",
        agent_id="main",
        turn=3,
        step=2,
        call_id="call_9",
        binding={"chat_id": "chat_1"},
        rpc=rpc,
    )


def tool(name: str) -> Any:
    return {t.spec.name: t for t in ledger_tools()}[name]


def test_every_tool_registers_with_a_valid_closed_schema() -> None:
    registry = ToolRegistry(ledger_tools())
    assert registry.names() == NAMES
    for name in NAMES:
        spec = registry.get(name).spec  # type: ignore[union-attr]
        assert spec.parameters["additionalProperties"] is False
        assert spec.timeout_s is not None
        assert not {"session_id", "scope_id", "chat_id", "sessionId"} & set(
            spec.parameters["properties"]
        )


def test_limits_are_capped_in_the_schemas() -> None:
    registry = ToolRegistry(ledger_tools())
    search = registry.validator("memory_search")
    assert not list(search.iter_errors({"limit": 20, "maxTokens": 2000}))
    assert list(search.iter_errors({"limit": 21}))
    assert list(search.iter_errors({"maxTokens": 5000}))
    assert list(registry.validator("variable_list").iter_errors({"scope": "chat", "limit": 101}))
    assert list(registry.validator("variable_set").iter_errors({"scope": "chat", "name": "1x"}))
    assert list(registry.validator("memory_write").iter_errors({"scope": "turn", "content": "x"}))


def test_forwarded_arguments_are_renamed_and_unknown_ones_dropped() -> None:
    args = {
        "maxTokens": 5,
        "ttlSeconds": 60,
        "domain": "work",
        "scopeId": "chat_2",
        "changes": [{"name": "a", "expectedRevision": 2}],
    }
    allowed = frozenset({"maxTokens", "ttlSeconds", "domain", "changes"})
    assert forwarded(args, allowed) == {
        "max_tokens": 5,
        "ttl_s": 60,
        "claim_domain": "work",
        "changes": [{"name": "a", "expected_revision": 2}],
    }


def test_results_are_camel_case_but_data_is_left_alone() -> None:
    reply = {
        "source_count": 1,
        "hits": [{"updated_at": "t", "source": {"call_id": "c"}}],
        "value": {"snake_key": 1},
    }
    assert camel(reply) == {
        "sourceCount": 1,
        "hits": [{"updatedAt": "t", "source": {"call_id": "c"}}],
        "value": {"snake_key": 1},
    }


async def test_tool_calls_its_rpc_with_the_session_from_the_context() -> None:
    rpc = FakeRpc({"found": True, "name": "hp", "value": 3, "scope_revision": 4})
    out = await tool("variable_get").handler({"scope": "chat", "name": "hp"}, context(rpc))
    [(subject, payload, timeout)] = rpc.calls
    assert subject == "tavern.rpc.ledger.variable.get"
    assert payload == {
        "scope": "chat",
        "name": "hp",
        "session_id": "s1",
        "turn": 3,
        "step": 2,
        "call_id": "call_9",
        "agent_id": "main",
    }
    assert timeout > 0
    assert out.ok
    assert json.loads(out.content) == {"found": True, "name": "hp", "value": 3, "scopeRevision": 4}


async def test_model_cannot_override_the_session() -> None:
    rpc = FakeRpc({"hits": [], "source_count": 0, "truncated": False})
    await tool("memory_search").handler({"query": "x", "session_id": "s2"}, context(rpc))
    assert rpc.calls[0][1]["session_id"] == "s1"


@pytest.mark.parametrize(
    ("reply", "code", "detail"),
    [
        (
            error_reply("conflict", "stale", retryable=False, current_revision=4),
            "conflict",
            "4",
        ),
        (
            error_reply("invalid", "no", reason="blocked", reasons=["secret:jwt"]),
            "invalid",
            "secret:jwt",
        ),
        (error_reply("invalid", "no", reason="blocked"), "invalid", "(blocked)"),
        (error_reply("timeout", "late"), "timeout", "late"),
        ({"error": "garbled"}, "internal", "garbled"),
    ],
)
async def test_rpc_errors_become_tool_failures(
    reply: dict[str, Any], code: str, detail: str
) -> None:
    out = await tool("memory_write").handler(
        {"scope": "chat", "content": "x"}, context(FakeRpc(reply))
    )
    assert not out.ok
    assert out.error is not None
    assert out.error.code == code
    assert detail in out.error.message
