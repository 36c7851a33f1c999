"""Rule views are rebuilt from the ledger: the consolidator's view table and the `<domain>.md`
files, whose stale siblings are removed unless no domain is active at all."""
# ruff: noqa: RUF001 - full-width characters are test data (Chinese text)

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integration.consolidator.conftest import Tavern, tavern_cli
from tests.support import eventually

pytestmark = pytest.mark.integration


@pytest.fixture
def consolidator_options(tmp_path: Path) -> dict[str, Any]:
    return {"consolidator_rules_dir": tmp_path / "rules"}


async def test_rule_files_follow_the_ledger_and_an_empty_view_sweeps_nothing(
    tavern: Tavern, tmp_path: Path
) -> None:
    rules_dir = tmp_path / "rules"
    rules_dir.mkdir(exist_ok=True)
    (rules_dir / "security.md").write_text("---\nkind: acp-rules\ndomain: security\n---\n")
    (rules_dir / "mine.md").write_text("my own notes, not a view\n")
    code, out = await tavern_cli(tavern, "rules", "rebuild")
    assert code == 0
    assert (rules_dir / "security.md").exists()

    await tavern.session("s1")
    await tavern.say("s1", "记住：配置和代码分开放")
    await eventually(lambda: _drafted(tavern))
    await tavern_cli(tavern, "rules", "accept", "1", "--scope", "s1")
    habit = rules_dir / "habit.md"
    assert "- 配置和代码分开放" in habit.read_text(encoding="utf-8")
    assert not (rules_dir / "security.md").exists()
    assert (rules_dir / "mine.md").exists()

    await tavern.db.execute("DELETE FROM consolidator.rule_view")
    habit.unlink()
    code, out = await tavern_cli(tavern, "rules", "rebuild", "--scope", "s1")
    assert code == 0
    assert '"rules": 1' in out
    assert await tavern.db.fetchval("SELECT count(*) FROM consolidator.rule_view") == 1
    assert habit.exists()


async def _drafted(tavern: Tavern) -> bool:
    return bool(await tavern.db.fetchval("SELECT count(*) FROM consolidator.rule_draft"))
