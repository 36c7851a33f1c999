from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from tavern_loop.tools import (
    SPILL_READ,
    SpillError,
    SpillPolicy,
    SpillStore,
    ToolCallOutcome,
    ToolContext,
    ToolLimits,
    ToolOutput,
    ToolPipeline,
    ToolRegistry,
)
from tests.unit.loop.tools.recording import Recorder, call, tool

BIG = "".join(f"line {i:05d} é\n" for i in range(3000))


async def _big(args: Any, ctx: ToolContext) -> ToolOutput:
    return ToolOutput(BIG)


def _pipeline(store: SpillStore | None, **limits: Any) -> ToolPipeline:
    registry = ToolRegistry([tool("big", _big), SPILL_READ])
    spill = SpillPolicy(store, max_inline_bytes=2000) if store else None
    return ToolPipeline(registry, ToolLimits(**limits), spill=spill)


async def _read_all(pipeline: ToolPipeline, rec: Recorder, locator: str) -> str:
    pages: list[str] = []
    offset: int | None = 0
    while offset is not None:
        args = f'{{"locator": "{locator}", "offset": {offset}, "limit": 7000}}'
        [page] = await rec.run(pipeline, call(f"r{offset}", "spill_read", args))
        assert page.ok, page.content
        assert not page.truncated
        pages.append(page.content.rsplit("\n\n[spill_read:", 1)[0])
        assert page.data is not None
        offset = page.data["next_offset"]
    return "".join(pages)


async def test_a_big_result_becomes_a_preview_and_spill_read_pages_through_it(
    tmp_path: Path,
) -> None:
    store = SpillStore(tmp_path)
    pipeline, rec = _pipeline(store), Recorder(spill=store)
    [outcome] = await rec.run(pipeline, call("c1", "big"))

    assert outcome.truncated
    assert outcome.spill_locator is not None
    assert outcome.spill_locator.startswith("spill:s1:")
    assert outcome.spill_bytes == len(BIG.encode())
    assert len(outcome.content.encode()) <= 2000
    assert outcome.content.startswith("line 00000")
    assert f"Full formatted result stored at: {outcome.spill_locator}." in outcome.content
    assert await _read_all(pipeline, rec, outcome.spill_locator) == BIG


async def test_without_spill_a_result_over_the_hard_limit_is_cut_with_a_marker() -> None:
    [outcome] = await Recorder().run(_pipeline(None, max_result_bytes=1000), call("c1", "big"))

    assert outcome.truncated
    assert outcome.spill_locator is None
    assert len(outcome.content.encode()) <= 1000
    assert outcome.content.startswith("line 00000")
    assert outcome.content.endswith(" bytes omitted, the limit is 1000 bytes ...]")


async def test_small_results_pass_through(tmp_path: Path) -> None:
    async def small(args: Any, ctx: ToolContext) -> ToolOutput:
        return ToolOutput("short")

    pipeline = ToolPipeline(
        ToolRegistry([tool("s", small)]), spill=SpillPolicy(SpillStore(tmp_path))
    )
    [outcome] = await Recorder().run(pipeline, call("c1", "s"))

    assert (outcome.content, outcome.truncated, outcome.spill_locator) == ("short", False, None)
    assert not os.listdir(tmp_path)


def test_spill_files_are_private_and_per_session(tmp_path: Path) -> None:
    store = SpillStore(tmp_path)
    locator = store.save("s1", "big", "call/../1", "text")
    path = store.path_of("s1", locator)

    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert path.parent.parent == tmp_path
    assert "s1" not in path.parent.name
    assert store.read("s1", locator) == ("text", 4, None)


@pytest.mark.parametrize(
    "locator",
    [
        "spill:other:x",
        "spill:s1:../../etc/passwd",
        "spill:s1:..",
        "/etc/passwd",
        "spill:s1:/etc/passwd",
        "spill:s1:a/b",
        "spill:s1:x\n",
        "spill:s1:",
        "spill:s1:" + "a" * 81,
        "spill::x",
        "x",
    ],
)
def test_forged_locators_are_refused(tmp_path: Path, locator: str) -> None:
    store = SpillStore(tmp_path)
    store.save("s1", "big", "c1", "secret of s1")

    with pytest.raises(SpillError):
        store.read("s1", locator)


def test_another_sessions_real_locator_is_refused(tmp_path: Path) -> None:
    store = SpillStore(tmp_path)
    theirs = store.save("s2", "big", "c1", "secret of s2")

    with pytest.raises(SpillError, match="does not belong to this session"):
        store.read("s1", theirs)
    forged = theirs.replace("spill:s2:", "spill:s1:")
    with pytest.raises(SpillError, match="no spilled output"):
        store.read("s1", forged)


def test_a_symlink_in_the_session_dir_is_refused(tmp_path: Path) -> None:
    store = SpillStore(tmp_path / "spill")
    mine = store.save("s1", "big", "c1", "mine")
    outside = tmp_path / "outside.txt"
    outside.write_text("not a spill")
    os.symlink(outside, store.path_of("s1", mine).parent / "evil.txt")

    with pytest.raises(SpillError):
        store.read("s1", "spill:s1:evil")


async def _spill_read(rec: Recorder, pipeline: ToolPipeline, locator: str) -> ToolCallOutcome:
    [outcome] = await rec.run(pipeline, call("r", "spill_read", f'{{"locator": "{locator}"}}'))
    return outcome


async def test_spill_read_reads_only_the_calling_sessions_spills(tmp_path: Path) -> None:
    store = SpillStore(tmp_path)
    theirs = store.save("s2", "big", "c1", "secret of s2")
    pipeline = _pipeline(store)

    outcome = await _spill_read(Recorder(spill=store), pipeline, theirs)

    assert not outcome.ok
    assert outcome.error is not None
    assert outcome.error.code == "SPILL_REFUSED"
    assert "secret" not in outcome.content
    assert (await _spill_read(Recorder(session_id="s2", spill=store), pipeline, theirs)).ok
