"""What `tavern st import` finds in a SillyTavern folder, and its check-only run (no servers)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from tavern_cli.stimport import Importer, NotImportable, discover, personas_of

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "sillytavern" / "default-user"


def test_a_user_folder_is_assets_first_then_chats_then_groups() -> None:
    found = [(i.kind, i.source, i.stem) for i in discover(FIXTURE)]
    assert [kind for kind, _, _ in found] == [
        "character",
        "lorebook",
        "personas",
        "chat",
        "chat",
        "group",
        "group chat",
    ]
    assert found[0] == ("character", "characters/default_Mira.png", "default_Mira")
    assert {stem for kind, _, stem in found if kind == "chat"} == {"default_Mira"}


def test_a_chats_folder_and_a_single_file() -> None:
    folder = FIXTURE / "chats" / "default_Mira"
    assert [i.source for i in discover(folder)] == [
        "default_Mira/Mira - 2026-12-01@21h20m05s.jsonl",
        "default_Mira/Mira - 2026-12-02@08h00m00s.jsonl",
    ]
    (one,) = discover(folder / "Mira - 2026-12-02@08h00m00s.jsonl")
    assert (one.kind, one.stem) == ("chat", "default_Mira")


def test_what_is_not_sillytavern_is_refused(tmp_path: Path) -> None:
    (tmp_path / "x.txt").write_text("hello")
    with pytest.raises(NotImportable, match="not a chat file"):
        discover(tmp_path / "x.txt")
    (tmp_path / "x.txt").unlink()
    with pytest.raises(NotImportable, match="no such file"):
        discover(tmp_path / "missing")
    with pytest.raises(NotImportable, match="user data folder"):
        discover(tmp_path)


def test_personas_come_from_settings_with_their_descriptions() -> None:
    settings = json.loads((FIXTURE / "settings.json").read_text())
    assert personas_of(settings) == [
        {
            "name": "Ren",
            "description": "A traveller caught in the storm.",
            "position": 0,
            "avatar": "ren.png",
        },
        {
            "name": "Keeper",
            "description": "Keeps the light.",
            "position": 0,
            "avatar": "1764000000000-keeper.png",
        },
    ]
    assert personas_of({"power_user": {}}) == []


def test_a_check_run_validates_every_file_and_publishes_nothing(tmp_path: Path) -> None:
    advanced: list[tuple[int, int]] = []
    importer = Importer(
        None, tmp_path, ZoneInfo("UTC"), advance=lambda f, n: advanced.append((f, n))
    )
    report = asyncio.run(importer.run(discover(FIXTURE)))
    assert [(r.kind, r.status) for r in report.rows] == [
        ("character", "valid"),
        ("lorebook", "valid"),
        ("persona", "valid"),
        ("persona", "valid"),
        ("chat", "valid"),
        ("chat", "valid"),
        ("group", "valid"),
        ("group chat", "valid"),
    ]
    assert sum(n for _, n in advanced) == 11, "every chat line counted, group chats too"
    assert importer.characters == {"default_Mira": "mira-a4bd614b"}
