"""The auth key of a deployment and the two things done with it: sign a principal into message
headers, and read the principal of a received message (adapters around `principals`)."""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from nats.aio.client import Client

from tavern_runtime import principals
from tavern_runtime.errors import ConfigurationError
from tavern_runtime.principals import HEADER, Principal
from tavern_runtime.settings import TavernSettings

KEY_FILE = "auth.key"
"""Contract name: the key file in the data dir (embedded mode), mode 0600."""


def key_path(data_dir: Path) -> Path:
    return Path(data_dir) / KEY_FILE


def ensure_key_file(data_dir: Path) -> Path:
    """Create `<data_dir>/auth.key` (0600, 32 random bytes as hex) unless it exists; reused on
    every restart, so tokens and sessions survive it."""
    path = key_path(data_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32) + "\n")
    return path


def load_key(settings: TavernSettings) -> bytes:
    """The deployment's key: `TAVERN_AUTH_KEY`, else the data dir's `auth.key`."""
    configured = settings.auth_key.get_secret_value().strip()
    if configured:
        return _checked(configured.encode("utf-8"), "TAVERN_AUTH_KEY")
    path = key_path(settings.data_dir)
    try:
        text = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise ConfigurationError(
            f"no auth key: set TAVERN_AUTH_KEY or create {path} (`tavern init` does)"
        ) from None
    return _checked(text.encode("utf-8"), str(path))


def _checked(key: bytes, where: str) -> bytes:
    try:
        return principals.check_key(key)
    except ValueError as exc:
        raise ConfigurationError(f"{where}: {exc}") from None


class Credentials:
    """Sign principals into headers and check the principal of received messages."""

    def __init__(
        self,
        key: bytes | Callable[[], bytes],
        clock: Callable[[], float] = time.time,
        ttl_s: float = principals.DEFAULT_TTL_S,
    ) -> None:
        self._load = key if callable(key) else (lambda: key)
        self._loaded: bytes | None = None
        self._clock, self._ttl = clock, ttl_s
        if not callable(key):
            self.ensure()

    @classmethod
    def of(cls, settings: TavernSettings) -> Credentials:
        """The deployment's credentials, the key read on first use (`ensure` reads it now):
        building an app opens nothing, not even the key file."""
        return cls(lambda: load_key(settings))

    def ensure(self) -> bytes:
        """Read and check the key now (once); `ConfigurationError` or ValueError if unusable."""
        if self._loaded is None:
            self._loaded = principals.check_key(self._load())
        return self._loaded

    @property
    def _key(self) -> bytes:
        return self.ensure()

    def token(self, principal: Principal) -> str:
        return principals.mint(principal, self._key, self._clock(), self._ttl)

    def headers(self, principal: Principal, **more: str) -> dict[str, str]:
        """Headers that carry `principal` (plus any others given)."""
        return {HEADER: self.token(principal), **more}

    def principal(self, headers: Mapping[str, str] | None, at: float | None = None) -> Principal:
        """The verified principal of a message; `Unauthenticated` if none or not genuine.
        `at`: when the message was stored, for a stored input read later (its token must
        have been valid then); default now."""
        return principals.from_headers(headers, self._key, self._clock() if at is None else at)


class SignedClient(Client):
    """A nats-py client whose every publish, requests and JetStream publishes included, carries
    a fresh token of one principal (a call that sets the header itself keeps its own). For
    clients that act as one principal throughout: the CLI, the demo, tests."""

    def __init__(self, credentials: Credentials, principal: Principal) -> None:
        super().__init__()
        self._credentials, self.principal = credentials, principal

    async def publish(
        self,
        subject: str,
        payload: bytes = b"",
        reply: str = "",
        headers: dict[str, str] | None = None,
    ) -> None:
        signed = {HEADER: self._credentials.token(self.principal), **(headers or {})}
        await super().publish(subject, payload, reply, signed)


async def connect_signed(
    servers: str | list[str], credentials: Credentials, principal: Principal, **options: Any
) -> SignedClient:
    """`nats.connect`, as `principal`."""
    nc = SignedClient(credentials, principal)
    await nc.connect(servers, **options)
    return nc
