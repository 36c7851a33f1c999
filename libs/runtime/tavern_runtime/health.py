"""The health endpoint of a service: `/healthz`, `/readyz` and `/metrics` on plain asyncio.

`/readyz` runs real checks (JetStream answers, Postgres answers `SELECT 1`) and says why not.
The bound port is written to `<data_dir>/run/<service>.health` for `tavern status`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from tavern_runtime import pg

log = structlog.get_logger(__name__)

Check = Callable[[], Awaitable[None]]
"""A readiness check: returns when ready, raises (with a reason) when not."""

CHECK_TIMEOUT_S = 3.0
REQUEST_TIMEOUT_S = 5.0
_REASONS = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}


class NotReady(Exception):
    """A readiness check failed; the message is the reason shown by `/readyz`."""


@dataclass(frozen=True)
class Response:
    status: int
    body: str
    content_type: str = "application/json"

    def encode(self, head_only: bool = False) -> bytes:
        payload = self.body.encode()
        head = (
            f"HTTP/1.1 {self.status} {_REASONS.get(self.status, 'Error')}\r\n"
            f"Content-Type: {self.content_type}\r\n"
            f"Content-Length: {len(payload)}\r\n"
            "Connection: close\r\n\r\n"
        )
        return head.encode() + (b"" if head_only else payload)


def _json(status: int, body: Mapping[str, Any]) -> Response:
    return Response(status, json.dumps(body, sort_keys=True))


async def run_checks(checks: Mapping[str, Check]) -> dict[str, str]:
    """Run all checks concurrently, each bounded; `{name: "ok" | reason}`."""
    names = list(checks)
    results = await asyncio.gather(*(_bounded(checks[n]) for n in names), return_exceptions=True)
    return {n: _verdict(r) for n, r in zip(names, results, strict=True)}


async def _bounded(check: Check) -> None:
    async with asyncio.timeout(CHECK_TIMEOUT_S):
        await check()


def _verdict(result: object) -> str:
    if not isinstance(result, BaseException):
        return "ok"
    if isinstance(result, TimeoutError):
        return f"no answer within {CHECK_TIMEOUT_S:.0f}s"
    return str(result) or type(result).__name__


@dataclass
class HealthServer:
    """Serves one service's probes. `ready` turns on after start-up, off at shutdown."""

    service: str
    host: str
    port: int
    checks: Mapping[str, Check]
    metrics: Callable[[], Awaitable[str]]
    phase: str = "starting"
    _server: asyncio.Server | None = field(default=None, repr=False)

    async def start(self) -> int:
        """Listen (port 0 = any free port) and return the bound port."""
        self._server = await asyncio.start_server(self._handle, self.host, self.port)
        self.port = int(self._server.sockets[0].getsockname()[1])
        log.info("health_listening", host=self.host, port=self.port)
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 2)
            self._server = None

    async def respond(self, method: str, path: str) -> Response:
        if method not in ("GET", "HEAD"):
            return _json(405, {"error": "method not allowed"})
        route = path.split("?", 1)[0]
        if route == "/healthz":
            return _json(200, {"service": self.service, "status": "alive"})
        if route == "/readyz":
            return await self._readiness()
        if route == "/metrics":
            return Response(200, await self.metrics(), "text/plain; version=0.0.4; charset=utf-8")
        return _json(404, {"error": "not found"})

    async def _readiness(self) -> Response:
        if self.phase != "running":
            return _json(503, {"service": self.service, "status": self.phase, "checks": {}})
        results = await run_checks(self.checks)
        ready = all(v == "ok" for v in results.values())
        status = "ready" if ready else "not_ready"
        return _json(
            200 if ready else 503, {"service": self.service, "status": status, "checks": results}
        )

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT_S):
                method, path = await _read_request(reader)
                response = await self.respond(method, path)
                writer.write(response.encode(head_only=method == "HEAD"))
                await writer.drain()
        except (TimeoutError, ValueError, ConnectionError, asyncio.IncompleteReadError):
            pass  # a probe that hung up or spoke nonsense gets nothing
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str]:
    """Method and path of an HTTP/1.x request; headers are read and ignored."""
    request_line = (await reader.readline()).decode("latin-1").strip()
    method, path, _version = request_line.split(" ", 2)
    while (await reader.readline()) not in (b"\r\n", b"\n", b""):
        pass
    return method, path


# --- checks --------------------------------------------------------------------------------------


def jetstream_check(connection: Callable[[], Any], streams: Sequence[str] = ()) -> Check:
    """Ready when connected and JetStream answers `account_info` and each stream's info."""

    async def check() -> None:
        nc = connection()
        if nc is None or not nc.is_connected:
            raise NotReady("not connected to NATS")
        js = nc.jetstream()
        await js.account_info()
        for name in streams:
            await _stream_exists(js, name)

    return check


async def _stream_exists(js: Any, name: str) -> None:
    from nats.js.errors import NotFoundError

    try:
        await js.stream_info(name)
    except NotFoundError:
        raise NotReady(f"stream {name} does not exist (run `tavern init`)") from None


def postgres_check(pool: Callable[[], pg.Pool | None]) -> Check:
    """Ready when a pooled connection answers `SELECT 1`."""

    async def check() -> None:
        current = pool()
        if current is None:
            raise NotReady("no Postgres pool (not started)")
        try:
            await pg.ping(current)
        except TimeoutError:
            raise
        except Exception as exc:
            raise NotReady(f"Postgres: {type(exc).__name__}: {exc}") from None

    return check


# --- the run file --------------------------------------------------------------------------------


def health_file(data_dir: Path, service: str) -> Path:
    return data_dir / "run" / f"{service}.health"


def write_health_file(data_dir: Path, service: str, host: str, port: int) -> Path | None:
    """Record where this process's probes listen; None (and a warning) if the dir is read-only."""
    path = health_file(data_dir, service)
    record = {"service": service, "pid": os.getpid(), "url": f"http://{host}:{port}"}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(record))
        tmp.replace(path)
    except OSError as exc:
        log.warning("health_file_not_written", path=str(path), error=str(exc))
        return None
    return path


def remove_health_file(path: Path | None) -> None:
    """Remove the file if it is still ours (a restarted replica may have replaced it)."""
    if path is None:
        return
    with contextlib.suppress(OSError, ValueError):
        if json.loads(path.read_text()).get("pid") == os.getpid():
            path.unlink()
