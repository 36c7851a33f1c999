"""Files under a data dir are their owner's only: chats and card images are created 0600 in
0700 folders whatever the umask, services run with umask 077, and a data dir made with the old
modes (0755 folders, 0644 files) is repaired at start."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tavern_projector.chatfiles import ChatFiles
from tavern_runtime import filemodes
from tavern_runtime.cards import importer

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def _modes_under(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): _mode(p) for p in root.rglob("*")}


@pytest.fixture
def old_umask() -> Iterator[None]:
    """The umask a root shell usually has (022), restored after."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def test_chat_files_and_card_images_are_created_owner_only_under_the_old_umask(
    tmp_path: Path, old_umask: None
) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o711)
    chats = ChatFiles(data / "chats")
    chats.write("Mira/chat-1", b'{"a": 1}\n')
    chats.keep_aside("Mira/chat-1", "20261207")
    assert importer.store_image(PNG, data) is not None
    found = _modes_under(data)
    assert len(found) >= 5, found
    wrong = {n: oct(m) for n, m in found.items() if m != (0o700 if (data / n).is_dir() else 0o600)}
    assert wrong == {}


def test_services_create_files_0600_and_folders_0700(tmp_path: Path, old_umask: None) -> None:
    filemodes.private_umask()
    (tmp_path / "made").mkdir()
    (tmp_path / "made" / "file").write_text("x")
    assert (_mode(tmp_path / "made"), _mode(tmp_path / "made" / "file")) == (0o700, 0o600)


def test_a_data_dir_with_the_old_modes_is_made_private_but_keeps_its_traverse_bit(
    tmp_path: Path, old_umask: None
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    data.chmod(0o711)
    for folder in ("chats/Mira", "assets/images", "run"):
        (data / folder).mkdir(parents=True)
        (data / folder).chmod(0o755)
    (data / "chats" / "Mira" / "chat-1.jsonl").write_text("{}\n")
    (data / "assets" / "images" / "a.png").write_bytes(PNG)
    (data / "chats" / "Mira" / "chat-1.jsonl").chmod(0o644)
    (data / "secret.key").write_text("k")
    (data / "secret.key").chmod(0o600)
    (data / "link").symlink_to(data / "secret.key")
    assert filemodes.make_private(data) == 7  # five folders, a chat, an image
    assert _mode(data) == 0o711
    assert {n: oct(m) for n, m in _modes_under(data).items() if n != "link"} == {
        "chats": "0o700",
        "chats/Mira": "0o700",
        "chats/Mira/chat-1.jsonl": "0o600",
        "assets": "0o700",
        "assets/images": "0o700",
        "assets/images/a.png": "0o600",
        "run": "0o700",
        "secret.key": "0o600",
    }
    assert filemodes.make_private(data) == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")
def test_the_repair_leaves_what_another_user_owns_alone(tmp_path: Path) -> None:
    theirs = tmp_path / "postgres"
    theirs.mkdir()
    (theirs / "pg_hba.conf").write_text("x")
    theirs.chmod(0o750)
    (theirs / "pg_hba.conf").chmod(0o640)
    os.chown(theirs, 65534, 65534)
    os.chown(theirs / "pg_hba.conf", 65534, 65534)
    assert filemodes.make_private(tmp_path) == 0
    assert (_mode(theirs), _mode(theirs / "pg_hba.conf")) == (0o750, 0o640)
