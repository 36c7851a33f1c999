"""Spilled tool output on local disk, one private directory per session.

A locator names a session and a file id; reads are confined to the caller's own session.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
from pathlib import Path
from typing import NamedTuple

from tavern_runtime.errors import PermanentError

LOCATOR_PREFIX = "spill:"
FILE_ID = re.compile(r"[A-Za-z0-9_-]{1,80}")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


class SpillError(PermanentError):
    code = "invalid"
    reason = "spill_refused"


class SpillPage(NamedTuple):
    text: str
    total_chars: int
    next_offset: int | None
    """None when the page reaches the end."""


def _segment(text: str, size: int) -> str:
    return _UNSAFE.sub("_", text)[:size].strip("_") or "x"


def file_id_for(tool_name: str, call_id: str) -> str:
    """A readable, unguessable file id: tool, call id, 12 random hex digits."""
    return f"{_segment(tool_name, 24)}-{_segment(call_id, 32)}-{secrets.token_hex(6)}"


class SpillStore:
    """Saves and reads spilled texts under `root`; dirs are 0700, files 0600 and never replaced."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def save(self, session_id: str, tool_name: str, call_id: str, text: str) -> str:
        """Store `text` in a new file of the session; return its locator."""
        folder = self._session_dir(session_id)
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        folder.mkdir(mode=0o700, exist_ok=True)
        os.chmod(folder, 0o700)
        file_id = file_id_for(tool_name, call_id)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(folder / f"{file_id}.txt", flags, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        return f"{LOCATOR_PREFIX}{session_id}:{file_id}"

    def read(
        self, session_id: str, locator: str, offset: int = 0, limit: int = 20_000
    ) -> SpillPage:
        """A page of `limit` characters from `offset` of a spill of this session."""
        if offset < 0 or limit < 1:
            raise SpillError("offset must be >= 0 and limit >= 1")
        text = self._open(self.path_of(session_id, locator))
        page = text[offset : offset + limit]
        end = offset + len(page)
        return SpillPage(page, len(text), end if end < len(text) else None)

    def path_of(self, session_id: str, locator: str) -> Path:
        """The file a locator names, refusing anything outside the caller's session."""
        file_id = _file_id(session_id, locator)
        folder = self._session_dir(session_id)
        path = folder / f"{file_id}.txt"
        if path.is_symlink() or not path.is_file():
            raise SpillError(f"no spilled output at {locator!r}")
        if not path.resolve().is_relative_to(folder.resolve()):
            raise SpillError(f"locator {locator!r} points outside this session")
        return path

    def _session_dir(self, session_id: str) -> Path:
        return self.root / hashlib.sha256(session_id.encode("utf-8")).hexdigest()[:16]

    def _open(self, path: Path) -> str:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, encoding="utf-8") as source:
            return source.read()


def _file_id(session_id: str, locator: str) -> str:
    if not locator.startswith(LOCATOR_PREFIX):
        raise SpillError(f"not a spill locator: {locator!r}")
    owner, sep, file_id = locator[len(LOCATOR_PREFIX) :].rpartition(":")
    if not sep or owner != session_id:
        raise SpillError(f"locator {locator!r} does not belong to this session")
    if not FILE_ID.fullmatch(file_id):
        raise SpillError(f"malformed spill locator {locator!r}")
    return file_id
