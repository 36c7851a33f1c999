"""Files under the data dir are their owner's only: the umask every process of an install runs
with, the modes files and folders are created with, and the repair of an existing install.

Chats, card images and exports hold what users said; on a root install other local users must
read none of it. PostgreSQL's own directory belongs to its system user and keeps the modes
PostgreSQL wants (the repair skips what this process's user does not own)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

PRIVATE_UMASK = 0o077
DIR_MODE = 0o700
FILE_MODE = 0o600


def private_umask() -> None:
    """From now on this process (and every child it starts) creates files 0600, folders 0700."""
    os.umask(PRIVATE_UMASK)


def private_folder(path: Path) -> Path:
    """`path` and its missing parents created 0700 (whatever the umask)."""
    missing = [p for p in (path, *path.parents) if not p.exists()]
    for folder in reversed(missing):
        folder.mkdir(mode=DIR_MODE, exist_ok=True)
        folder.chmod(DIR_MODE)
    return path


def write_private(path: Path, data: bytes) -> None:
    """Write `data` to `path`, created 0600 (an existing file is made 0600 too)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    with os.fdopen(fd, "wb") as handle:
        os.fchmod(handle.fileno(), FILE_MODE)
        handle.write(data)


def make_private(root: Path) -> int:
    """Take every read, write and execute bit of group and others off the folders and files
    under `root` that this user owns (`root` itself keeps its mode: as root its traverse bit
    lets PostgreSQL's user pass); return how many changed. Links, sockets and what another
    user owns (PostgreSQL's data as root) are left alone."""
    changed = 0
    me = os.geteuid()
    for folder, dirs, files in os.walk(root):
        base = Path(folder)
        for name in [*dirs, *files]:
            changed += _private(base / name, me)
        dirs[:] = [d for d in dirs if _owned_dir(base / d, me)]
    return changed


def _owned_dir(path: Path, me: int) -> bool:
    info = path.lstat()
    return stat.S_ISDIR(info.st_mode) and info.st_uid == me


def _private(path: Path, me: int) -> int:
    info = path.lstat()
    if info.st_uid != me or not (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)):
        return 0
    mode = stat.S_IMODE(info.st_mode)
    if not mode & 0o077:
        return 0
    path.chmod(mode & 0o700)
    return 1
