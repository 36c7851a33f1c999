"""Chat files on disk: atomic writes (temp file, fsync, rename) under one chats directory, and
group chats beside it as SillyTavern keeps them (`group chats/<chat id>.jsonl`)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from tavern_projector.domain.groupdef import GROUP_CHATS, GROUPS
from tavern_projector.framework import SHADOW_SUFFIX
from tavern_runtime import filemodes

ASIDE_MARK = " (edited outside "


def sibling(chats_dir: Path, name: str) -> Path:
    """The folder `name` beside a chats directory (a rebuild's shadow beside its shadow)."""
    suffix = SHADOW_SUFFIX if chats_dir.name.endswith(SHADOW_SUFFIX) else ""
    return chats_dir.parent / f"{name}{suffix}"


def revision(data: bytes) -> str:
    """A chat file's revision: base64url(sha256(bytes)), as the tavern store computes it."""
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode().rstrip("=")


class ChatFiles:
    """`<root>/<character>/<chat id>.jsonl`, written atomically; a key under `group chats/`
    is a group chat, in the folder of that name beside the root."""

    def __init__(self, root: Path, *, durable: bool = True) -> None:
        self.root, self.durable = root, durable
        self.group_root = sibling(root, GROUP_CHATS)

    def _place(self, key: str) -> tuple[Path, str]:
        folder, _, rest = key.partition("/")
        return (self.group_root, rest) if folder == GROUP_CHATS and rest else (self.root, key)

    def path(self, key: str) -> Path:
        base, rest = self._place(key)
        return base / f"{rest}.jsonl"

    def read(self, key: str) -> bytes | None:
        try:
            return self.path(key).read_bytes()
        except FileNotFoundError:
            return None

    def write(self, key: str, data: bytes) -> str:
        """Replace the file in one step; a reader sees the old or the new file, never half.

        Not `durable` (a rebuild's shadow): no fsync per file; the rebuild syncs once before
        it swaps the shadow in."""
        return self.write_path(self.path(key), data)

    def write_path(self, path: Path, data: bytes) -> str:
        """Write any file of the folder atomically (a group definition, say)."""
        filemodes.private_folder(path.parent)
        temp = path.with_name(f".{path.name}.tmp")
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, filemodes.FILE_MODE)
            with os.fdopen(fd, "wb") as handle:
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
        base, rest = self._place(key)
        return base / f"{rest}{ASIDE_MARK}{stamp}).jsonl"

    def keep_aside(self, key: str, stamp: str, into: ChatFiles | None = None) -> Path | None:
        """Copy the file to its aside name (in `into`, another chats directory, if given)."""
        data = self.read(key)
        if data is None:
            return None
        target = (into or self).aside_path(key, stamp)
        filemodes.private_folder(target.parent)
        filemodes.write_private(target, data)
        return target

    def asides(self) -> list[Path]:
        """Every file kept aside so far, relative to the root (group chats' under
        `group chats/`)."""
        found = []
        for base, prefix in ((self.root, Path()), (self.group_root, Path(GROUP_CHATS))):
            if base.exists():
                found += [
                    prefix / p.relative_to(base) for p in base.rglob(f"*{ASIDE_MARK}*).jsonl")
                ]
        return found

    def located(self, relative: Path) -> Path:
        """Where a path of `asides()` is on disk."""
        base, rest = self._place(relative.as_posix())
        return base / rest

    def remove(self, key: str) -> None:
        self.path(key).unlink(missing_ok=True)

    def clear(self) -> None:
        """Empty the chats directory, its group chats and group definitions."""
        for folder in (self.root, self.group_root, sibling(self.root, GROUPS)):
            shutil.rmtree(folder, ignore_errors=True)
        filemodes.private_folder(self.root)


def swap_all(live: Path, shadow: Path) -> list[Path]:
    """Swap a chats directory and the group folders beside it; return the old ones."""
    pairs = [(live, shadow)] + [
        (sibling(live, n), sibling(shadow, n)) for n in (GROUP_CHATS, GROUPS)
    ]
    for _, new in pairs:
        filemodes.private_folder(new)
    return [swap_directories(old, new) for old, new in pairs]


def swap_directories(live: Path, shadow: Path) -> Path:
    """Put `shadow` where `live` is; return where the old live directory went (to delete)."""
    old = live.with_name(f"{live.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if live.exists():
        os.replace(live, old)
    os.replace(shadow, live)
    return old
