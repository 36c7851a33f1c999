"""The loop's memory and variable tools round-trip against a running ledger app."""

from __future__ import annotations

import json
from typing import Any

import pytest
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout

from tavern_loop.tools import ToolContext, ToolOutput, ToolRegistry
from tavern_loop.tools.ledger_tools import ledger_tools
from tavern_runtime import principals
from tests.integration.ledger.stores.conftest import Ledger
from tests.support import auth

pytestmark = pytest.mark.integration


class Tools:
    """Calls tools the way the pipeline does: validate the arguments, then run the handler."""

    def __init__(self, ledger: Ledger, session_id: str) -> None:
        self.registry = ToolRegistry(ledger_tools())
        self.ledger = ledger
        self.ctx = ToolContext(
            session_id=session_id,
            agent_id="main",
            turn=1,
            step=1,
            call_id="call_1",
            binding={},
            rpc=self.rpc,
        )

    async def rpc(self, subject: str, payload: dict[str, Any], timeout: float) -> dict[str, Any]:
        """As the loop's engine does it: as the loop acting for the session's owner; no
        responder or a timeout is an error reply."""
        headers = auth(principals.service("loop").acting_for(principals.LOCAL_OWNER))
        try:
            reply = await self.ledger.nc.request(
                subject, json.dumps(payload).encode(), timeout, headers=headers
            )
        except (NoRespondersError, NatsTimeout) as exc:
            return {"error": {"code": "unavailable", "message": repr(exc)}}
        body: dict[str, Any] = json.loads(reply.data)
        return body

    async def __call__(self, tool_name: str, /, **args: Any) -> ToolOutput:
        errors = [e.message for e in self.registry.validator(tool_name).iter_errors(args)]
        assert not errors, errors
        tool = self.registry.get(tool_name)
        assert tool is not None
        return await tool.handler(args, self.ctx)

    async def ok(self, tool_name: str, /, **args: Any) -> dict[str, Any]:
        out = await self(tool_name, **args)
        assert out.ok, out.content
        assert out.data is not None
        assert json.loads(out.content) == out.data
        return out.data


async def test_memory_tools_round_trip(ledger: Ledger) -> None:
    await ledger.open_session("s1", "chat_1", "char_a")
    call = Tools(ledger, "s1")
    written = await call.ok(
        "memory_write", scope="character", content="Ren keeps a brass key", tags=["ren"]
    )
    assert (written["revision"], written["scope"], written["source"]["call_id"]) == (
        1,
        "character",
        "call_1",
    )
    found = await call.ok("memory_search", query="brass key", limit=5, maxTokens=100)
    assert [h["id"] for h in found["hits"]] == [written["id"]]
    assert (found["sourceCount"], found["truncated"]) == (1, False)
    read = await call.ok("memory_read", id=written["id"])
    assert read["memory"]["createdAt"]
    updated = await call.ok(
        "memory_update", id=written["id"], expectedRevision=1, content="Ren lost the key"
    )
    assert updated["revision"] == 2
    stale = await call("memory_update", id=written["id"], expectedRevision=1, importance=0.1)
    assert stale.error is not None
    assert (stale.error.code, "current revision: 2" in stale.error.message) == ("conflict", True)
    secret = await call("memory_write", scope="chat", content="password: hunter2hunter2hunter2")
    assert secret.error is not None
    assert (secret.error.code, "(blocked)" in secret.error.message) == ("invalid", True)
    assert "secret" in secret.error.message
    forgot = await call.ok("memory_forget", id=written["id"], expectedRevision=2)
    assert forgot["found"]
    assert (await call.ok("memory_search", query="key"))["hits"] == []


async def test_variable_tools_round_trip(ledger: Ledger) -> None:
    await ledger.open_session("s1", "chat_1", "char_a")
    call = Tools(ledger, "s1")
    first = await call.ok("variable_set", scope="chat", name="hp", value=10)
    assert (first["revision"], first["type"], first["scopeRevision"]) == (1, "integer", 1)
    patched = await call.ok(
        "variable_patch",
        scope="chat",
        expectedRevision=1,
        changes=[
            {"name": "hp", "value": 9, "expectedRevision": 1},
            {"name": "mood", "value": {"calm": True}},
        ],
    )
    assert patched["scopeRevision"] == 2
    got = await call.ok("variable_get", scope="chat", name="mood")
    assert (got["value"], got["type"], got["revision"]) == ({"calm": True}, "object", 2)
    listed = await call.ok("variable_list", scope="chat", prefix="", limit=10)
    assert [(v["name"], v["summary"]) for v in listed["variables"]] == [
        ("hp", "9"),
        ("mood", "{calm} (1 keys)"),
    ]
    assert (listed["sourceCount"], listed["truncated"]) == (2, False)
    conflict = await call("variable_set", scope="chat", name="hp", value=1, expectedRevision=1)
    assert conflict.error is not None
    assert conflict.error.code == "conflict"
    gone = await call.ok("variable_delete", scope="chat", name="mood")
    assert gone["found"]
    turn = await call.ok("variable_set", scope="turn", name="draft", value="x")
    assert turn["revision"] == 1
    no_character = Tools(ledger, "s2")
    await ledger.open_session("s2", "chat_2", None)
    refused = await no_character("variable_get", scope="character", name="hp")
    assert refused.error is not None
    assert (refused.error.code, "(scope_unavailable)" in refused.error.message) == (
        "not_found",
        True,
    )
