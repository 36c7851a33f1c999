"""The data directory of `tavern up`: where the servers keep data and where running processes
leave notes for `tavern status` (`run/servers.json`, `run/<service>.health`, `run/up.lock`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tavern_runtime.credentials import private_dir
from tavern_runtime.errors import ConfigurationError
from tavern_runtime.health import health_file

DEFAULT_DATA_DIR = ".tavern"


def data_dir_from_env() -> Path:
    return Path(os.environ.get("TAVERN_DATA_DIR") or DEFAULT_DATA_DIR).resolve()


@dataclass(frozen=True)
class Layout:
    root: Path

    @property
    def nats(self) -> Path:
        return self.root / "nats"

    @property
    def postgres(self) -> Path:
        return self.root / "postgres"

    @property
    def run(self) -> Path:
        return self.root / "run"

    @property
    def servers_file(self) -> Path:
        return self.run / "servers.json"

    @property
    def lock_file(self) -> Path:
        return self.run / "up.lock"

    def health_file(self, service: str) -> Path:
        return health_file(self.root, service)


@dataclass(frozen=True)
class Servers:
    """What a running `tavern up` serves; the DSN may hold a password, so the file is 0600."""

    nats_url: str
    database_url: str
    nats_monitor_url: str = ""
    pid: int = 0


def write_servers(layout: Layout, servers: Servers) -> None:
    private_dir(layout.run)
    tmp = layout.servers_file.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(asdict(servers), out)
    tmp.replace(layout.servers_file)


def read_servers(layout: Layout) -> Servers | None:
    """The servers of a live `tavern up` on this data dir, else None."""
    record = _read_json(layout.servers_file)
    if record is None or not pid_alive(int(record.get("pid", 0))):
        return None
    known = ("nats_url", "database_url", "nats_monitor_url", "pid")
    return Servers(**{k: record[k] for k in known if k in record})


def remove_servers(layout: Layout) -> None:
    with contextlib.suppress(OSError):
        layout.servers_file.unlink()


def read_health(layout: Layout, service: str) -> dict[str, Any] | None:
    """The health record of a live process of `service`, else None."""
    record = _read_json(layout.health_file(service))
    if record is None or not pid_alive(int(record.get("pid", 0))):
        return None
    return record


def gateway_url(layout: Layout) -> str | None:
    """The web app's URL, as the running gateway wrote it (`run/gateway.url`)."""
    found = _read_json(layout.run / "gateway.url")
    return str(found["url"]) if found and found.get("url") else None


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        loaded = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return loaded if isinstance(loaded, dict) else None


def pid_alive(pid: int) -> bool:
    """A running process (a zombie, exited but not yet reaped, does not count)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False  # no procfs (macOS) or already gone
    return stat.rpartition(")")[2].split()[0] == "Z"


class UpLock:
    """One `tavern up` per data dir: an exclusive `flock` held for the life of the process.

    The kernel drops the lock when the process dies, so a crash never leaves a stale lock.
    """

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self._fd: int | None = None

    def acquire(self) -> None:
        private_dir(self.layout.root)
        private_dir(self.layout.run)
        fd = os.open(self.layout.lock_file, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise ConfigurationError(
                f"another `tavern up` (pid {holder}) already runs on {self.layout.root}; "
                "stop it first, or set TAVERN_DATA_DIR to another directory"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        os.ftruncate(self._fd, 0)
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None
