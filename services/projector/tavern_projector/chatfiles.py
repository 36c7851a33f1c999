"""Chat files on disk: atomic writes (temp file, fsync, rename) under one chats directory."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

ASIDE_MARK = " (edited outside "


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
        try:
            with temp.open("wb") as handle:
                handle.write(data)
                if self.durable:
                    handle.flush()
                    os.fsync(handle.fileno())
            os.replace(temp, path)
        except OSError:
            temp.unlink(missing_ok=True)  # no half-written temp file is left behind
            raise
        return revision(data)

    async def write_all(self, files: Sequence[tuple[str, bytes]]) -> list[str | OSError]:
        """Write every `(key, data)` off the event loop, different files at once (their
        fsyncs share the disk's flushes; the loop keeps serving the other projections); a
        rebuild's shadow, which is not fsynced file by file, is written in place.
        Returns each file's revision, or the error that kept it from being written. Files with
        the same key are written one after the other, in order."""
        by_key: dict[str, list[int]] = {}
        for index, (key, _) in enumerate(files):
            by_key.setdefault(key, []).append(index)
        found: list[str | OSError] = [OSError("not written")] * len(files)

        def write_in_order(indexes: list[int]) -> None:
            for index in indexes:
                key, data = files[index]
                try:
                    found[index] = self.write(key, data)
                except OSError as exc:
                    found[index] = exc

        if not self.durable:  # no fsync to wait for: threads would only add their hops
            for indexes in by_key.values():
                write_in_order(indexes)
            return found
        await asyncio.gather(*(asyncio.to_thread(write_in_order, i) for i in by_key.values()))
        return found

    def stat(self, key: str) -> tuple[int, int] | None:
        """(mtime in ns, size) of the file, or None when there is none: what tells a file
        someone else wrote from the one written here last."""
        try:
            found = self.path(key).stat()
        except FileNotFoundError:
            return None
        return found.st_mtime_ns, found.st_size

    def aside_path(self, key: str, stamp: str) -> Path:
        """Where an edited file is kept when its chat is rebuilt: beside it, a chat of its own
        for SillyTavern (`<chat id> (edited outside <stamp>).jsonl`)."""
        return self.root / f"{key}{ASIDE_MARK}{stamp}).jsonl"

    def keep_aside(self, key: str, stamp: str, into: ChatFiles | None = None) -> Path | None:
        """Copy the file to its aside name (in `into`, another chats directory, if given)."""
        data = self.read(key)
        if data is None:
            return None
        target = (into or self).aside_path(key, stamp)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        return target

    def asides(self) -> list[Path]:
        """Every file kept aside so far, relative to the root."""
        if not self.root.exists():
            return []
        return [p.relative_to(self.root) for p in self.root.rglob(f"*{ASIDE_MARK}*).jsonl")]

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
