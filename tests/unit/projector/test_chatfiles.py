"""Chat files written together: each atomically, the same file in order, a failure alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from tavern_projector.chatfiles import ChatFiles, revision


@pytest.mark.parametrize("durable", [True, False], ids=["live", "shadow"])
async def test_files_are_written_together_and_the_same_file_keeps_its_order(
    tmp_path: Path, durable: bool
) -> None:
    files = ChatFiles(tmp_path, durable=durable)
    (tmp_path / "Mira" / "blocked.jsonl").mkdir(parents=True)  # a rename onto it fails
    batch = [
        ("Mira/a", b"a1\n"),
        ("Ren/b", b"b1\n"),
        ("Mira/a", b"a1\na2\n"),
        ("Mira/blocked", b"never\n"),
        *((f"Ren/c{i}", f"c{i}\n".encode()) for i in range(20)),
    ]
    written = await files.write_all(batch)

    assert written[0] == revision(b"a1\n")
    assert written[2] == revision(b"a1\na2\n")
    assert files.read("Mira/a") == b"a1\na2\n"
    assert files.read("Ren/b") == b"b1\n"
    assert isinstance(written[3], IsADirectoryError)
    assert [files.read(f"Ren/c{i}") for i in range(20)] == [f"c{i}\n".encode() for i in range(20)]
    assert written[4:] == [revision(f"c{i}\n".encode()) for i in range(20)]
    assert not list(tmp_path.rglob(".*.tmp"))  # noqa: ASYNC240 - no temp file is left behind


def test_a_group_chat_lives_beside_the_chats_and_a_rebuild_swaps_all_three(tmp_path: Path) -> None:
    from tavern_projector.chatfiles import swap_all

    live, shadow = tmp_path / "chats", tmp_path / "chats.rebuild"
    files = ChatFiles(live)
    assert files.path("group chats/s_1") == tmp_path / "group chats" / "s_1.jsonl"
    assert files.path("Mira/s_2") == live / "Mira" / "s_2.jsonl"
    assert ChatFiles(shadow).path("group chats/s_1") == tmp_path / "group chats.rebuild/s_1.jsonl"
    files.write("group chats/s_1", b"old")
    files.keep_aside("group chats/s_1", "2026-12-02@08h00m00s")
    assert files.asides() == [Path("group chats/s_1 (edited outside 2026-12-02@08h00m00s).jsonl")]
    assert files.located(files.asides()[0]).read_bytes() == b"old"

    rebuilt = ChatFiles(shadow, durable=False)
    rebuilt.write("group chats/s_1", b"new")
    rebuilt.write_path(tmp_path / "groups.rebuild" / "g1.json", b"{}")
    old = swap_all(live, shadow)
    assert files.read("group chats/s_1") == b"new"
    assert (tmp_path / "groups" / "g1.json").read_bytes() == b"{}"
    assert {p.name for p in old} == {"chats.old", "group chats.old", "groups.old"}
    assert not shadow.exists()
