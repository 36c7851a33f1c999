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
