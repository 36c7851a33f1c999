"""The rules feedback channel end to end: drafts from prefixes and repeated corrections, human
decisions carried to the ledger (where recall injects active rules), the 40-character flag, the
"rule may be ineffective" audit and the daily cap."""
# ruff: noqa: RUF001 - full-width characters are test data (Chinese text)

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.consolidator.conftest import Tavern, tavern_cli
from tests.support import eventually

pytestmark = pytest.mark.integration

KEEP_APART = "记住：配置和代码分开放"
REPEATED = "不对，缩进要用四个空格而不是两个空格或者制表符"  # the first 24 characters repeat
FOUR_SPACES = "remember: always indent Python code with four spaces, never with tabs"


async def drafts(tavern: Tavern, n: int) -> list[dict[str, Any]]:
    async def check() -> list[dict[str, Any]]:
        rows = await tavern.db.fetch("SELECT * FROM consolidator.rule_draft ORDER BY created_at")
        return [dict(r) for r in rows] if len(rows) >= n else []

    return await eventually(check)


async def test_prefixed_corrections_become_drafts_that_humans_accept_and_pin(
    tavern: Tavern,
) -> None:
    await tavern.session("s1")
    await tavern.say("s1", KEEP_APART)
    await drafts(tavern, 1)
    await tavern.say("s1", FOUR_SPACES)
    first, second = await drafts(tavern, 2)
    assert (first["text"], first["gates"]) == ("配置和代码分开放", ["explicit-prefix"])

    code, listing = await tavern_cli(tavern, "rules", "list", "--scope", "s1")
    assert code == 0
    assert "1. [habit] 配置和代码分开放" in listing
    assert "⚠ over the 40-character safety line" in listing.splitlines()[3]

    await tavern_cli(tavern, "rules", "accept", "1", "--scope", "s1")
    await tavern_cli(tavern, "rules", "reject", "1", "--scope", "s1")  # now the English one
    await tavern_cli(tavern, "rules", "pin", "1", "--scope", "s1")
    rule = await tavern.db.fetchrow("SELECT * FROM ledger.rule")
    assert (rule["text"], rule["state"], rule["gates"]) == (
        "配置和代码分开放", "active", ["explicit-prefix", "always"]
    )  # fmt: skip
    states = dict(await tavern.db.fetch("SELECT text, state FROM consolidator.rule_draft"))
    assert states == {"配置和代码分开放": "accepted", second["text"]: "rejected"}
    recalled = await tavern.rpc("ledger", "recall", session_id="s1", query="代码 配置")
    assert "配置和代码分开放" in recalled["text"]
    await eventually(lambda: _viewed(tavern, rule["id"]))


async def _viewed(tavern: Tavern, rule_id: str) -> bool:
    row = await tavern.db.fetchrow(
        "SELECT state, pinned FROM consolidator.rule_view WHERE id = $1", rule_id
    )
    return row is not None and (row["state"], row["pinned"]) == ("active", True)


async def test_a_correction_repeating_an_active_rule_is_audited_not_drafted(tavern: Tavern) -> None:
    await tavern.session("s1")
    await tavern.say("s1", KEEP_APART)
    await drafts(tavern, 1)
    await tavern_cli(tavern, "rules", "accept", "1", "--scope", "s1")
    await tavern.say("s1", "更正：配置和代码一定要分开放好")

    async def audited() -> Any:
        return await tavern.db.fetchrow(
            "SELECT * FROM consolidator.audit WHERE op = 'rule_ineffective_suspect'"
        )

    entry = await eventually(audited)
    assert entry["reason"] == "correction overlaps active rule (rule may be ineffective)"
    assert len(await drafts(tavern, 1)) == 1


async def test_a_correction_said_twice_becomes_a_draft(tavern: Tavern) -> None:
    await tavern.session("s1")
    await tavern.say("s1", REPEATED + "，所有文件都是")
    await tavern.settled()
    assert await tavern.db.fetchval("SELECT count(*) FROM consolidator.rule_draft") == 0
    await tavern.say("s1", REPEATED + "，上次也说过了")
    [draft] = await drafts(tavern, 1)
    assert draft["gates"] == ["repeated-2x"]


@pytest.mark.parametrize("consolidator_options", [{"consolidator_rule_daily_runs": 1}])
async def test_drafting_stops_at_the_daily_cap(tavern: Tavern) -> None:
    await tavern.session("s1")
    await tavern.say("s1", KEEP_APART)
    await drafts(tavern, 1)
    await tavern.say("s1", FOUR_SPACES)
    await tavern.settled()
    assert await tavern.rpc("consolidator", "rules.draft", scope_id="s1") == {
        "ran": False,
        "reason": "daily_cap",
    }
    assert len(await drafts(tavern, 1)) == 1


async def test_the_drafting_window_is_judged_by_when_a_correction_was_said(
    tavern: Tavern,
) -> None:
    await tavern.session("s1")
    await tavern.say(
        "s1", "记住：周五下午不要部署任何服务", day=-10
    )  # said ten days ago, arrives now
    await tavern.say("s1", KEEP_APART)
    [draft] = await drafts(tavern, 1)
    assert draft["text"] == "配置和代码分开放"
    await tavern.settled()
    again = await tavern.rpc("consolidator", "rules.draft", scope_id="s1")
    assert "error" not in again, again
    texts = await tavern.db.fetch("SELECT text FROM consolidator.rule_draft")
    assert [r["text"] for r in texts] == ["配置和代码分开放"]
