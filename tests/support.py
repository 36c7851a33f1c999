"""Helpers shared by tests: polling waits and real-server handles."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any, TypeVar, overload
from urllib.parse import parse_qs, quote, urlencode, urlsplit, urlunsplit

from nats.aio.client import Client

T = TypeVar("T")


# A check's `None` means "not yet": `eventually` returns only a truthy value, so never `None`.
@overload
async def eventually(
    check: Callable[[], Awaitable[T | None]], timeout: float = ..., interval: float = ...
) -> T: ...
@overload
async def eventually(
    check: Callable[[], T | None], timeout: float = ..., interval: float = ...
) -> T: ...
async def eventually(
    check: Callable[[], Any], timeout: float = 10.0, interval: float = 0.05
) -> Any:
    """Poll `check` until it returns a truthy value without raising; return that value.

    On timeout, re-raise the last AssertionError (or fail with the last falsy value).
    """
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    last_value: object = None
    while True:
        try:
            value = check()
            if inspect.isawaitable(value):
                value = await value
            if value:
                return value
            last_value = value
        except AssertionError as exc:
            last_error = exc
        if time.monotonic() >= deadline:
            if last_error is not None:
                raise last_error
            raise AssertionError(f"condition not met within {timeout}s (last value {last_value!r})")
        await asyncio.sleep(interval)


TEST_AUTH_KEY = "tavern-test-auth-key-0123456789abcdef"
"""The auth key of a test run: `tests/conftest.py` puts it in `TAVERN_AUTH_KEY`, so services
started in process or as processes check tokens against it."""


async def flushed(nc: Client) -> None:
    """Return once the server has everything `nc` was asked to send, subscriptions included.

    nats-py's `flush()` writes its PING straight to the socket while a SUB may still wait in the
    client's pending buffer for the flusher task, so the PONG can come back before the server
    holds the subscription, and a request from another connection then finds no responders.
    Letting the flusher empty that buffer first puts the PING behind the SUB."""
    for _ in range(1000):
        if not nc.pending_data_size:
            break
        await asyncio.sleep(0.001)
    await nc.flush()


def auth(principal: Any = None) -> dict[str, str]:
    """Headers that carry `principal` (default: the operator), signed with the test key."""
    from tavern_runtime import principals
    from tavern_runtime.auth import Credentials

    return Credentials(TEST_AUTH_KEY.encode()).headers(principal or principals.OPERATOR)


class Signed(Mapping[str, str]):
    """Headers of `principal` signed whenever they are read. A module-level constant holding
    `as_user(...)` would carry a token minted when the tests were collected, expired (tokens
    live five minutes) by the time a long run reaches the test."""

    def __init__(self, principal: Any = None) -> None:
        self._principal = principal

    def _headers(self) -> dict[str, str]:
        return auth(self._principal)

    def __getitem__(self, key: str) -> str:
        return self._headers()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._headers())

    def __len__(self) -> int:
        return len(self._headers())


def signed_user(name: str) -> Signed:
    """`as_user(name)`, signed afresh each time it is used."""
    from tavern_runtime import principals

    return Signed(principals.user(name))


def as_user(name: str) -> dict[str, str]:
    from tavern_runtime import principals

    return auth(principals.user(name))


async def signed_nats(url: str, principal: Any = None, **options: Any) -> Any:
    """A nats-py client whose every publish carries `principal` (default: the operator), as
    the CLI's does; a call that sets the header itself keeps its own."""
    from tavern_runtime import principals
    from tavern_runtime.auth import Credentials, connect_signed

    credentials = Credentials(TEST_AUTH_KEY.encode())
    return await connect_signed(url, credentials, principal or principals.OPERATOR, **options)


def has_samples(exposition: str, expected: list[str]) -> bool:
    """Whether a Prometheus text exposition holds every sample written out in `expected`
    (`name{label="v",...} value` lines), compared as parsed samples: label order and number
    formatting are the exposition library's."""
    from prometheus_client.parser import text_string_to_metric_families

    def samples(text: str) -> set[tuple[str, frozenset[tuple[str, str]], float]]:
        return {
            (s.name, frozenset(s.labels.items()), float(s.value))
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }

    return samples("\n".join(expected) + "\n") <= samples(exposition)


def passwordless_logins(dsn: str) -> list[str]:
    """The superuser's logins without a password to the Postgres of `dsn`: over loopback TCP,
    and over its Unix socket when `dsn` goes through one."""
    parts = urlsplit(dsn)
    query = parse_qs(parts.query)
    _, port = tcp_address(dsn)
    database = parts.path.lstrip("/")
    found = [f"postgresql://postgres@127.0.0.1:{port}/{database}"]
    if "host" in query:
        socket_dir = quote(query["host"][0], safe="/")
        found.append(f"postgresql://postgres@/{database}?host={socket_dir}&port={port}")
    return found


def tcp_address(dsn: str) -> tuple[str, int]:
    """Where the Postgres of `dsn` listens on TCP: its host, or loopback when `dsn` goes through
    a Unix socket (the embedded server listens on both, the same port)."""
    parts = urlsplit(dsn)
    port = parts.port or int((parse_qs(parts.query).get("port") or ["5432"])[0])
    return parts.hostname or "127.0.0.1", port


def over_tcp(dsn: str, host: str, port: int) -> str:
    """`dsn` with its login and database, reaching `host:port` over TCP instead."""
    parts = urlsplit(dsn)
    login = parts.netloc.rpartition("@")[0]  # user and password, as given
    user = f"{login}@" if login else ""
    query = {k: v[0] for k, v in parse_qs(parts.query).items() if k not in ("host", "port")}
    return urlunsplit(parts._replace(netloc=f"{user}{host}:{port}", query=urlencode(query)))
