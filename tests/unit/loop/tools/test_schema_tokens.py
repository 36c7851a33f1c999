"""The tool schemas a request carries: one list per registry, and its token count kept."""

from __future__ import annotations

import json

from tavern_llm.tokens import BLOCK_OVERHEAD, tools_tokens
from tavern_loop.tools import ToolRegistry
from tests.unit.loop.tools.recording import echo, tool


def _counted(schemas: list[dict[str, object]]) -> int:
    return -(-len(json.dumps(schemas)) // 4) + BLOCK_OVERHEAD  # ASCII: four characters a token


def test_the_registry_hands_out_one_schema_list_until_a_tool_is_registered() -> None:
    registry = ToolRegistry([tool("a", echo())])
    first = registry.schemas()
    assert registry.schemas() is first
    registry.register(tool("b", echo()))
    second = registry.schemas()
    assert second is not first
    assert [s["function"]["name"] for s in second] == ["a", "b"]


def test_tool_tokens_are_the_same_counted_once_or_again() -> None:
    registry = ToolRegistry([tool("a", echo()), tool("b", echo())])
    schemas = registry.schemas()
    assert tools_tokens(schemas) == _counted(schemas)
    assert tools_tokens(schemas) == _counted(schemas)  # from the kept count
    copy = [dict(s) for s in schemas]
    assert tools_tokens(copy) == _counted(schemas)
    longer = ToolRegistry([tool("a", echo()), tool("b", echo()), tool("c", echo())]).schemas()
    assert tools_tokens(longer) == _counted(longer) > tools_tokens(schemas)
    assert tools_tokens([]) == 0
