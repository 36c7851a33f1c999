"""The generated secrets of an embedded installation: one NATS user per service, the operator
and the client, the Postgres superuser and one Postgres role per service that owns a schema.

Kept in `<data dir>/credentials.json` (mode 0600, directory 0700), created on the first
`tavern up` and reused afterwards, so a restart logs in with the same passwords.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tavern_runtime.errors import ConfigurationError

NATS_USERS = ("operator", "loop", "ledger", "projector", "consolidator", "gateway", "client")
"""Who logs in to NATS: the CLI as operator, each service as itself, front ends as client."""
DB_ROLES = ("ledger", "projector", "consolidator", "gateway")
"""The services that own a schema; the loop keeps no tables and gets no database login."""
PG_ADMIN = "postgres"
FILE_NAME = "credentials.json"
PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
TRAVERSE = 0o011


def new_secret() -> str:
    """192 random bits, URL-safe (fits a DSN and a nats-server config without quoting)."""
    return secrets.token_hex(24)


@dataclass(frozen=True)
class Credentials:
    nats: dict[str, str]
    """user -> password"""
    postgres: dict[str, str]
    """role -> password; `postgres` is the superuser"""

    def nats_password(self, user: str) -> str:
        return self.nats[user]

    def db_password(self, role: str) -> str:
        return self.postgres[role]

    def as_json(self) -> dict[str, Any]:
        return {"nats": dict(self.nats), "postgres": dict(self.postgres)}

    @classmethod
    def generate(cls) -> Credentials:
        return cls(
            {user: new_secret() for user in NATS_USERS},
            {role: new_secret() for role in (PG_ADMIN, *DB_ROLES)},
        )

    def completed(self) -> Credentials:
        """These, plus a new secret for any user or role a newer release added."""
        nats = {user: self.nats.get(user) or new_secret() for user in NATS_USERS}
        pg = {role: self.postgres.get(role) or new_secret() for role in (PG_ADMIN, *DB_ROLES)}
        return Credentials({**self.nats, **nats}, {**self.postgres, **pg})

    def __repr__(self) -> str:  # never print a secret by accident
        return f"Credentials(nats={sorted(self.nats)}, postgres={sorted(self.postgres)})"


def private_dir(path: Path) -> Path:
    """`path` created if missing, mode 0700; an existing one loses every read and write bit
    of group and others. A traverse bit stays: as root, the embedded Postgres runs as its own
    system user, which must pass through the data dir to reach its own 0700 directory."""
    path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
    path.chmod(PRIVATE_DIR | (path.stat().st_mode & TRAVERSE))
    return path


def credentials_path(data_dir: Path) -> Path:
    return data_dir / FILE_NAME


def read_credentials(data_dir: Path) -> Credentials | None:
    """The credentials of this data dir, None if it has none yet."""
    path = credentials_path(data_dir)
    try:
        record = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"cannot read {path}: {type(exc).__name__}") from None
    if not isinstance(record, dict):
        raise ConfigurationError(f"{path} is not a credentials file")
    nats, pg = record.get("nats"), record.get("postgres")
    if not isinstance(nats, dict) or not isinstance(pg, dict):
        raise ConfigurationError(f"{path} is not a credentials file")
    return Credentials(
        {str(k): str(v) for k, v in nats.items()}, {str(k): str(v) for k, v in pg.items()}
    )


def write_credentials(data_dir: Path, credentials: Credentials) -> None:
    """Atomically, 0600 from the first byte."""
    path = credentials_path(data_dir)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE)
    with os.fdopen(fd, "w") as out:
        json.dump(credentials.as_json(), out, indent=2)
        out.flush()
        os.fsync(out.fileno())
    tmp.replace(path)
    path.chmod(PRIVATE_FILE)


def load_or_create(data_dir: Path) -> Credentials:
    """The data dir's credentials: read and reused, completed if a user is missing, generated
    on the first run. The data dir becomes 0700 and the file 0600."""
    private_dir(data_dir)
    found = read_credentials(data_dir)
    wanted = found.completed() if found is not None else Credentials.generate()
    if found != wanted:
        write_credentials(data_dir, wanted)
    else:
        credentials_path(data_dir).chmod(PRIVATE_FILE)
    return wanted
