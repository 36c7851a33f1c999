"""Chat files on disk: atomic writes (temp file, fsync, rename) under one chats directory."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
from pathlib import Path


def revision(data: bytes) -> str:
    """A chat file's revision: base64url(sha256(bytes)), as the tavern store computes it."""
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode().rstrip("=")


class ChatFiles:
    """`<root>/<character>/<chat id>.jsonl`, written atomically."""

    def __init__(self, root: Path, *, durable: bool = True) -> None:
        self.root, self.durable = root, durable

    def path(self, key: str) -> Path:
        return self.root / f"{key}.jsonl"

    def read(self, key: str) -> bytes | None:
        try:
            return self.path(key).read_bytes()
        except FileNotFoundError:
            return None

    def write(self, key: str, data: bytes) -> str:
        """Replace the file in one step; a reader sees the old or the new file, never half.

        Not `durable` (a rebuild's shadow): no fsync per file; the rebuild syncs once before
        it swaps the shadow in."""
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        temp = path.with_name(f".{path.name}.tmp")
        with temp.open("wb") as handle:
            handle.write(data)
            if self.durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(temp, path)
        return revision(data)

    def remove(self, key: str) -> None:
        self.path(key).unlink(missing_ok=True)

    def clear(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        self.root.mkdir(parents=True, exist_ok=True)


def swap_directories(live: Path, shadow: Path) -> Path:
    """Put `shadow` where `live` is; return where the old live directory went (to delete)."""
    old = live.with_name(f"{live.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if live.exists():
        os.replace(live, old)
    os.replace(shadow, live)
    return old
