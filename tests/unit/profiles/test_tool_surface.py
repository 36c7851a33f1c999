"""The agent-tavern tool surface: caps, no identity parameters, the write policy, st refusal."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tavern_loop.options import ProfileOptions
from tavern_loop.tools.base import ToolContext, ToolOutput, ToolRegistry
from tavern_loop.tools.execution import CallExecutor, ToolCallRequest
from tavern_loop.tools.limits import ToolLimits
from tavern_loop.tools.policy import BULK_REFUSED, GLOBAL_REFUSED, authorise, profile_tools

TAVERN = ["tavern_character_get", "tavern_lore_search", "tavern_scene_get", "tavern_history_search"]
IDENTITY = {"session_id", "sessionId", "scope_id", "scopeId", "chat_id", "chatId", "character"}


class Ledger:
    """Records what reached the service (nothing should, for a refused call)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def __call__(self, subject: str, body: dict[str, Any], timeout: float) -> dict[str, Any]:
        self.calls.append((subject, body))
        return {"items": [], "hits": [], "entries": [], "fields": {}, "ok": True}


Call = tuple[str, dict[str, Any]]


def run(
    name: str,
    args: dict[str, Any],
    *,
    architecture: str = "agent-tavern",
    allow_global_writes: bool = False,
    allow_bulk_deletes: bool = False,
) -> tuple[ToolOutput, list[Call]]:
    options = ProfileOptions(
        allow_global_writes=allow_global_writes, allow_bulk_deletes=allow_bulk_deletes
    )
    rpc = Ledger()
    registry = ToolRegistry(profile_tools(options))
    executor = CallExecutor(registry, ToolLimits(), authorise)
    binding = {"architecture": architecture, "character_id": "mira", "persona_id": None}
    ctx = ToolContext("s1", "main", 1, 1, "c1", binding, rpc)
    executed = asyncio.run(executor.run(ToolCallRequest("c1", name, json.dumps(args)), ctx, 1))
    return executed.output, rpc.calls


def test_the_surface_offers_tavern_ledger_memory_and_variable_tools() -> None:
    names = [t.spec.name for t in profile_tools(ProfileOptions())]
    reads = [n for n in names[:6] if n != "tavern_speaker_choose"]
    assert reads == [*TAVERN, "acp_query"]
    assert names[3] == "tavern_speaker_choose", "a group's choice, after the scene"
    assert {"memory_search", "memory_write", "variable_get", "variable_patch"} <= set(names)
    assert "memory_consolidate" not in names, "off by default"


def test_no_tool_takes_an_identity_and_every_read_is_bounded() -> None:
    for tool in profile_tools(ProfileOptions()):
        properties = tool.spec.parameters["properties"]
        assert not IDENTITY & set(properties), tool.spec.name
        assert tool.spec.parameters["additionalProperties"] is False
        if tool.spec.name in [*TAVERN, "acp_query"]:
            bounds = {"limit", "maxTokens", "maxChars"} & set(properties)
            assert bounds, f"{tool.spec.name} has no limit"
            assert all("maximum" in properties[b] for b in bounds)


@pytest.mark.parametrize(
    ("name", "args", "reason"),
    [
        ("tavern_history_search", {"query": "key", "limit": 500}, "greater than the maximum"),
        ("tavern_lore_search", {"query": "x", "maxTokens": 100_000}, "greater than the maximum"),
        ("acp_query", {"limit": 21}, "greater than the maximum"),
        ("tavern_history_search", {"query": "k", "session_id": "other"}, "Additional properties"),
        ("memory_search", {"query": "k", "scopeId": "other-chat"}, "Additional properties"),
        ("tavern_character_get", {"character": "someone-else"}, "Additional properties"),
    ],
)
def test_over_limit_and_cross_scope_calls_are_refused_before_any_rpc(
    name: str, args: dict[str, Any], reason: str
) -> None:
    output, calls = run(name, args)
    assert output.error is not None
    assert output.error.code == "INVALID_ARGS"
    assert reason in output.error.message
    assert calls == []


def test_global_writes_need_configuration() -> None:
    args = {"scope": "global", "content": "the sky is green"}
    refused, calls = run("memory_write", args)
    assert refused.error is not None
    assert (refused.error.code, refused.error.message) == ("FORBIDDEN", GLOBAL_REFUSED)
    assert calls == []
    allowed, calls = run("memory_write", args, allow_global_writes=True)
    assert allowed.ok
    assert calls[0][1]["scope"] == "global"
    variable, _ = run("variable_set", {"scope": "global", "name": "x", "value": 1})
    assert variable.error is not None
    assert variable.error.code == "FORBIDDEN"


def test_bulk_deletes_need_configuration() -> None:
    changes = [{"name": "a", "delete": True}, {"name": "b", "delete": True}]
    args = {"scope": "chat", "expectedRevision": 3, "changes": changes}
    refused, calls = run("variable_patch", args)
    assert refused.error is not None
    assert (refused.error.code, refused.error.message, calls) == ("FORBIDDEN", BULK_REFUSED, [])
    one, _ = run("variable_patch", {**args, "changes": changes[:1]})
    assert one.ok
    allowed, _ = run("variable_patch", args, allow_bulk_deletes=True)
    assert allowed.ok


def test_reads_are_scoped_by_the_context_never_the_model() -> None:
    output, calls = run("tavern_character_get", {"fields": ["name", "personality"]})
    assert output.ok
    assert calls[0][1] == {
        "kind": "character",
        "character": "mira",
        "fields": ["name", "personality"],
        "max_chars": 2000,
        "session_id": "s1",
    }
    _, calls = run("acp_query", {"text": "key"})
    assert calls[0][1] == {
        "state": "active",
        "limit": 10,
        "observations": True,
        "for_model": True,  # the ledger audits the read as a model's
        "text": "key",
        "session_id": "s1",
    }
    _, calls = run("acp_query", {"state": "all", "includeObservations": False})
    assert (calls[0][1]["state"], calls[0][1]["observations"]) == ("all", False)
    persona, calls = run("tavern_character_get", {"kind": "persona"})
    assert persona.error is not None
    assert (persona.error.code, calls) == ("NOT_BOUND", [])


def test_st_sessions_have_no_tools() -> None:
    output, calls = run("tavern_scene_get", {}, architecture="st")
    assert output.error is not None
    assert (output.error.code, calls) == ("TOOL_DENIED", [])


def test_speaker_choose_is_refused_outside_a_group_and_sends_nothing() -> None:
    output, calls = run("tavern_speaker_choose", {"name": "Oren"})
    assert output.error is not None
    assert (output.error.code, calls) == ("NOT_BOUND", [])
