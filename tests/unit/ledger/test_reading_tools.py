"""No tool that reads memory or history feeds the ledger: every tool the loop offers is listed
here as reading, changing the ledger's stores, or bringing in outside information, and only the
last kind of result becomes evidence (pure: the extraction rule, no IO)."""

from __future__ import annotations

import pytest

from tavern_ledger.domain.extract import (
    READING_TOOLS,
    STORE_TOOLS,
    Draft,
    ExtractConfig,
    SessionFacts,
    Skip,
    extract,
)
from tavern_loop.tools.builtin import builtin_tools
from tavern_loop.tools.ledger_tools import ledger_tools
from tavern_loop.tools.tavern_tools import tavern_tools
from tests.unit.ledger.builders import tool_result

READS = {
    "acp_query": "the ledger's evidence and observations",
    "memory_search": "the memory store",
    "memory_read": "the memory store",
    "variable_get": "the variable store",
    "variable_list": "the variable store",
    "tavern_history_search": "the chat history",
    "tavern_lore_search": "lorebooks",
    "tavern_character_get": "character cards and personas",
    "tavern_scene_get": "the session's own binding",
    "tavern_speaker_choose": "the group's own members: a choice of speaker, not information",
    "spill_read": "a tool result already in the log",
}
CHANGES_STORES = {
    "memory_write",
    "memory_update",
    "memory_forget",
    "variable_set",
    "variable_patch",
    "variable_delete",
}
OUTSIDE: set[str] = set()
"""Tools whose results are outside information (web, files, MCP): none ships with the loop."""

SESSION = SessionFacts("s1", "c1")


def test_every_tool_the_loop_offers_is_classified() -> None:
    offered = {t.spec.name for t in (*builtin_tools(), *tavern_tools(), *ledger_tools())}
    assert offered == set(READS) | CHANGES_STORES | OUTSIDE
    assert set(READS) == READING_TOOLS
    assert CHANGES_STORES == STORE_TOOLS


@pytest.mark.parametrize("name", sorted(READS))
def test_a_reading_tool_never_feeds_the_ledger_even_when_configured_to(name: str) -> None:
    event = tool_result(content="Remembered: the user lives in Lyon.", name=name)
    assert extract(event, SESSION, ExtractConfig(skip_tools=frozenset())) == Skip(
        f"tool:ledger_echo:{name}"
    )
    assert isinstance(extract(event, SESSION), Skip)


@pytest.mark.parametrize("name", sorted(CHANGES_STORES))
def test_a_store_tool_does_not_feed_the_ledger_by_default(name: str) -> None:
    event = tool_result(content="stored: the user lives in Lyon", name=name)
    assert isinstance(extract(event, SESSION), Skip)


def test_an_outside_tool_still_feeds_the_ledger() -> None:
    drafted = extract(tool_result(content="Lyon had 22 degrees today.", name="web_fetch"), SESSION)
    assert isinstance(drafted, Draft)
    assert (drafted.source_class, drafted.authority) == ("external_tool", "external_information")
