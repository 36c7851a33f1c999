"""Connections to NATS: a nats-py client and a FastStream broker built with the same options.

Both reconnect forever and log connection changes; a connection that closes without being asked
to ends the process loudly, so an orchestrator restarts it instead of it idling disconnected.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any
from urllib.parse import unquote, urlsplit

import nats
from faststream import AckPolicy
from faststream.nats import NatsBroker
from faststream.nats.security import NatsUserPassword
from nats.aio.client import Client
from nats.js import JetStreamContext

from tavern_runtime.errors import ConfigurationError
from tavern_runtime.logs import get_logger
from tavern_runtime.rpcguard import RPC_PREFIX, RpcLimits, is_rpc, rpc_guard
from tavern_runtime.secretscan import redact_secrets
from tavern_runtime.settings import TavernSettings

log = get_logger(__name__)

JS_TIMEOUT_S = 5.0
RECONNECT_WAIT_S = 2
EXIT_CONNECTION_LOST = 70


def exit_process() -> None:
    """Default reaction to a connection that closed by itself: exit non-zero, right now."""
    sys.stderr.flush()
    os._exit(EXIT_CONNECTION_LOST)


@dataclass
class ConnectionGuard:
    """The connection callbacks of one client: logs changes, fails loudly on an unasked close."""

    name: str
    on_lost: Callable[[], None] = exit_process
    closing: bool = field(default=False, init=False)

    def expect_close(self) -> None:
        """Mark the coming close as ours, so `closed` does not treat it as a loss."""
        self.closing = True

    async def disconnected(self) -> None:
        log.warning("nats_disconnected", connection=self.name)

    async def reconnected(self) -> None:
        log.info("nats_reconnected", connection=self.name)

    async def error(self, exc: Exception) -> None:
        log.warning("nats_error", connection=self.name, error=redact_secrets(repr(exc)))

    async def closed(self) -> None:
        if self.closing:
            log.info("nats_closed", connection=self.name)
            return
        log.critical("nats_connection_lost", connection=self.name)
        self.on_lost()

    def callbacks(self) -> dict[str, Any]:
        return {
            "disconnected_cb": self.disconnected,
            "reconnected_cb": self.reconnected,
            "error_cb": self.error,
            "closed_cb": self.closed,
        }


def connect_options(settings: TavernSettings, guard: ConnectionGuard) -> dict[str, Any]:
    """Options shared by the nats-py client and the FastStream broker (credentials excluded).

    `drain_timeout` bounds a close: nats-py 2.16 never finishes draining a pull subscription
    whose last fetch timed out, so an unbounded drain would hang until its 30 s default.
    """
    return {
        "name": guard.name,
        "max_reconnect_attempts": -1,
        "reconnect_time_wait": RECONNECT_WAIT_S,
        "drain_timeout": max(1, int(settings.shutdown_grace_s)),
        **guard.callbacks(),
    }


def rpc_limits(
    settings: TavernSettings, deadline_s: float | None = None, max_request_bytes: int | None = None
) -> RpcLimits:
    """The RPC guard's limits; `deadline_s` for a service whose RPCs run long (dreaming),
    `max_request_bytes` for one that reads less than the shared limit (refused unparsed)."""
    return RpcLimits(
        min(settings.rpc_max_request_bytes, max_request_bytes or settings.rpc_max_request_bytes),
        deadline_s or settings.rpc_deadline_s,
        max_backlog_bytes=settings.rpc_max_backlog_bytes,
    )


INBOX = "_INBOX"


def inbox_prefix_of(user: str) -> str:
    """The private reply prefix of a NATS user: `_INBOX_<user>` (`_INBOX` for no user).

    deploy/nats/accounts.conf lets each user subscribe to its own prefix only, so no user
    receives another's RPC or JetStream API replies."""
    return f"{INBOX}_{user}" if user else INBOX


def url_user(servers: str | list[str]) -> str:
    """The user named in the first of `servers` (`nats://user:pw@host`), else ""."""
    first = (servers.split(",") if isinstance(servers, str) else servers or [""])[0].strip()
    user = urlsplit(first).username if first else None
    return unquote(user) if user else ""


def login_user(settings: TavernSettings) -> str:
    """Who this process logs in as: `TAVERN_NATS_USER`, else the user of the first URL."""
    return settings.nats_user or url_user(settings.nats_servers)


def login_options(user: str, password: str, servers: str | list[str] = "") -> dict[str, Any]:
    """nats-py `connect` keywords of one login: user, password and the user's inbox prefix
    (with no `user`, the prefix of the user named in the URL, if any)."""
    options: dict[str, Any] = {"inbox_prefix": inbox_prefix_of(user or url_user(servers))}
    if user and password:
        options.update(user=user, password=password)
    return options


def _credentials(settings: TavernSettings) -> dict[str, Any]:
    """user/password (when set) and the inbox prefix of the user this process logs in as."""
    if settings.nats_user:
        return login_options(settings.nats_user, settings.nats_password)
    return {"inbox_prefix": inbox_prefix_of(login_user(settings))}


@dataclass
class NatsConnection:
    """A connected nats-py client, its JetStream context and its guard."""

    nc: Client
    js: JetStreamContext
    guard: ConnectionGuard

    async def close(self) -> None:
        """Drain subscriptions and close; the closed callback knows this was asked for."""
        self.guard.expect_close()
        if not self.nc.is_closed:
            await self.nc.drain()


async def connect(
    settings: TavernSettings,
    name: str,
    *,
    on_lost: Callable[[], None] = exit_process,
    js_timeout: float = JS_TIMEOUT_S,
) -> NatsConnection:
    """Connect with unlimited reconnects; `on_lost` runs if the connection closes by itself."""
    guard = ConnectionGuard(name, on_lost)
    nc = await nats.connect(
        settings.nats_servers, **connect_options(settings, guard), **_credentials(settings)
    )
    log.info("nats_connected", connection=name, server=server_of(nc))
    try:
        require_server_version(nc)
    except ConfigurationError:
        guard.expect_close()
        await nc.close()
        raise
    return NatsConnection(nc, nc.jetstream(timeout=js_timeout), guard)


def server_of(nc: Client) -> str | None:
    """`host:port` of the server `nc` is connected to: never the URL's user or password."""
    url = nc.connected_url
    if url is None or url.hostname is None:
        return None
    return f"{url.hostname}:{url.port}" if url.port else url.hostname


MIN_SERVER = (2, 12)
"""Atomic batch publish and wildcard-subject conditional appends arrived in nats-server 2.12."""


def require_server_version(nc: Client) -> None:
    """Refuse, with the reason, a nats-server older than the session log needs."""
    version = nc.connected_server_version
    found = (version.major, version.minor)
    if found < MIN_SERVER:
        have = f"{version.major}.{version.minor}.{version.patch}"
        need = ".".join(map(str, MIN_SERVER))
        raise ConfigurationError(
            f"nats-server {have} is too old: AgentTavern needs {need} or newer "
            "(atomic batches, wildcard-subject conditional appends)"
        )


@asynccontextmanager
async def connected(
    settings: TavernSettings, name: str, *, on_lost: Callable[[], None] = exit_process
) -> AsyncIterator[NatsConnection]:
    """`connect`, then close on exit."""
    conn = await connect(settings, name, on_lost=on_lost)
    try:
        yield conn
    finally:
        await conn.close()


class TavernBroker(NatsBroker):
    """A `NatsBroker` whose own `stop()` is not mistaken for a lost connection, and whose RPC
    subscriptions get the pending limits of the RPC guard (`RpcLimits.subscription_pending`)."""

    def __init__(
        self, *args: Any, guard: ConnectionGuard, rpc: RpcLimits | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.guard = guard
        self.rpc_limits = rpc or RpcLimits()

    def subscriber(self, *args: Any, **kwargs: Any) -> Any:
        subject = args[0] if args else kwargs.get("subject", "")
        if str(subject).startswith(RPC_PREFIX) and kwargs.get("stream") is None:
            for key, value in self.rpc_limits.subscription_pending.items():
                kwargs.setdefault(key, value)
        return super().subscriber(*args, **kwargs)

    async def stop(
        self,
        exc_type: type[BaseException] | None = None,
        exc_val: BaseException | None = None,
        exc_tb: TracebackType | None = None,
    ) -> None:
        self.guard.expect_close()
        await super().stop(exc_type, exc_val, exc_tb)


async def tolerant_decoder(msg: Any, original: Callable[[Any], Awaitable[Any]]) -> Any:
    """FastStream's decoder, except that a body it cannot decode (JSON nested too deep, or
    not the JSON its content type claims) reaches the handler as its raw bytes: FastStream
    would raise before the handler runs, so a request would time out instead of getting the
    handler's structured error, and a stream message would be retried as if transient."""
    try:
        return await original(msg)
    except (ValueError, RecursionError):
        return msg.body


def bounded_decoder(
    max_rpc_bytes: int,
) -> Callable[[Any, Callable[[Any], Awaitable[Any]]], Awaitable[Any]]:
    """`tolerant_decoder`, which leaves an RPC request over `max_rpc_bytes` undecoded: the
    RPC guard refuses it as `too_large` without parsing megabytes first."""

    async def decode(msg: Any, original: Callable[[Any], Awaitable[Any]]) -> Any:
        subject = str(getattr(msg.raw_message, "subject", ""))
        if len(msg.body) > max_rpc_bytes and is_rpc(subject, msg.reply_to):
            return msg.body
        return await tolerant_decoder(msg, original)

    return decode


def build_broker(
    settings: TavernSettings,
    name: str,
    *,
    on_lost: Callable[[], None] = exit_process,
    rpc_deadline_s: float | None = None,
    rpc_max_request_bytes: int | None = None,
    **overrides: Any,
) -> TavernBroker:
    """A FastStream broker: nack on error, structlog logger, graceful stop, same connect options.

    Streams are provisioned elsewhere: bind subscribers with `JStream(name, declare=False)`.
    Every `tavern.rpc.>` handler runs inside the RPC guard (`tavern_runtime.rpcguard`), with
    the shared limits or a service's own `rpc_deadline_s` and (stricter) `rpc_max_request_bytes`.
    """
    guard = ConnectionGuard(name, on_lost)
    limits = rpc_limits(settings, rpc_deadline_s, rpc_max_request_bytes)
    security = (
        NatsUserPassword(settings.nats_user, settings.nats_password) if settings.nats_user else None
    )
    options: dict[str, Any] = {
        **connect_options(settings, guard),
        "ack_policy": AckPolicy.NACK_ON_ERROR,
        "graceful_timeout": settings.shutdown_grace_s,
        "logger": get_logger("faststream"),
        "log_level": logging.DEBUG,  # FastStream's per-message Received/Processed lines
        "js_options": {"timeout": JS_TIMEOUT_S},
        "security": security,
        "inbox_prefix": inbox_prefix_of(login_user(settings)),
        "decoder": bounded_decoder(limits.max_request_bytes),
        "middlewares": (rpc_guard(limits),),
        **overrides,
    }
    return TavernBroker(settings.nats_servers, guard=guard, rpc=limits, **options)
