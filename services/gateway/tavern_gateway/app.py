"""The gateway's composition root: the FastAPI app, its lifespan (pool, migrations, NATS) and
the process that serves it with uvicorn beside the shared health endpoint.

Stateless: accounts and web sessions live in Postgres (schema `gateway`), everything else on
the bus, so any number of replicas serve the same users.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import signal
import socket
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp

from tavern_events import streams, subjects
from tavern_gateway import apidocs, errors, headers, limits, panel, web
from tavern_gateway.bus import Bus
from tavern_gateway.config import GatewaySettings
from tavern_gateway.store import Store
from tavern_runtime import bus as runtime_bus
from tavern_runtime import filemodes, health, pg, tracing
from tavern_runtime.auth import Credentials
from tavern_runtime.errors import TavernError
from tavern_runtime.logs import configure_logging, get_logger
from tavern_runtime.migrations import MigrationSet, load_migrations, migrate
from tavern_runtime.provision import ConsumerSpec

log = get_logger(__name__)

SERVICE = "gateway"
SCHEMA = "gateway"
VERSION = "0.1.0"
STREAMS: tuple[str, ...] = (streams.SESSIONS.name, streams.INPUTS.name, streams.ASSETS.name)
CONSUMERS: tuple[ConsumerSpec, ...] = ()
"""The gateway has no durable consumers: it follows session logs with ordered consumers."""
STATIC = Path(__file__).parent / "static"


def migrations() -> MigrationSet:
    return load_migrations(SCHEMA, "tavern_gateway")


class GatewayApp(FastAPI):
    """The FastAPI app with the security headers outside everything, its error handler too."""

    def build_middleware_stack(self) -> ASGIApp:
        return headers.SecurityHeaders(super().build_middleware_stack())


def build_app(settings: GatewaySettings) -> FastAPI:
    """The app; opens nothing until its lifespan starts."""
    credentials = Credentials.of(settings)
    holder: dict[str, Any] = {}

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        credentials.ensure()
        pool = await pg.create_pool(pg.require_dsn(settings), max_size=10)
        try:
            await migrate(pool, migrations())
            conn = await runtime_bus.connect(settings, SERVICE)
            try:
                app.state.gateway = web.Gateway(
                    settings, Store(pool), Bus(conn.nc, credentials, settings.gateway_rpc_timeout_s)
                )
                holder.update(pool=pool, nc=conn.nc)
                ping = await conn.nc.subscribe(
                    subjects.rpc(SERVICE, "ping"), queue=f"{SERVICE}-rpc", cb=_ping
                )
                yield
                await ping.unsubscribe()
            finally:
                holder.clear()
                await conn.close()
        finally:
            await pool.close()

    app = GatewayApp(
        title="AgentTavern gateway",
        version=VERSION,
        description="The web app's HTTP API. Every call acts as the signed-in user (a cookie "
        "session); state-changing calls need the `X-CSRF-Token` header equal to the "
        '`tavern_csrf` cookie. Errors are `{"error": {code, message, retryable}}`.',
        lifespan=lifespan,
        docs_url=None,  # served below from the package, not a CDN
        redoc_url=None,
    )
    app.state.holder = holder
    app.add_middleware(
        limits.BodyLimit,
        limit=functools.partial(
            limits.limit_for,
            default=settings.gateway_max_body_bytes,
            upload=settings.gateway_max_upload_bytes,
        ),
    )
    app.add_exception_handler(TavernError, errors.on_tavern_error)
    app.add_exception_handler(RequestValidationError, errors.on_validation)
    app.add_exception_handler(HTTPException, errors.on_http)
    app.add_exception_handler(Exception, errors.on_crash)
    app.include_router(web.api)
    app.include_router(panel.panel)
    app.include_router(web.pages)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/docs", include_in_schema=False)
    async def api_docs() -> HTMLResponse:
        return apidocs.page(app.title, app.openapi_url or "/openapi.json")

    app.mount(apidocs.ASSETS_URL, apidocs.assets(), name="docs-assets")
    return app


async def _ping(msg: Any) -> None:
    body = {"service": SERVICE, "version": VERSION, "ok": True}
    await msg.respond(json.dumps(body).encode())


def url_file(data_dir: Path) -> Path:
    return Path(data_dir) / "run" / "gateway.url"


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.setblocking(False)
    return sock


async def serve(settings: GatewaySettings) -> int:
    app = build_app(settings)
    try:
        sock = _listen(settings.gateway_host, settings.gateway_port)
    except OSError as exc:
        if "TAVERN_GATEWAY_PORT" in os.environ:  # asked for this port: do not move
            log.error("gateway_port_unavailable", port=settings.gateway_port, error=str(exc))
            return 1
        log.warning("gateway_default_port_taken", port=settings.gateway_port)
        sock = _listen(settings.gateway_host, 0)
    port = sock.getsockname()[1]
    host = settings.gateway_host
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    url = settings.gateway_public_url or f"http://{shown}:{port}/"
    config = uvicorn.Config(
        app, log_config=None, access_log=False, lifespan="on", timeout_graceful_shutdown=3
    )
    server = uvicorn.Server(config)
    holder = app.state.holder

    async def nats_ok() -> None:
        nc = holder.get("nc")
        await health.jetstream_check(lambda: nc, STREAMS)()

    async def metrics() -> str:
        return ""

    probes = health.HealthServer(
        SERVICE,
        settings.health_host,
        settings.health_port,
        {"nats": nats_ok, "postgres": health.postgres_check(lambda: holder.get("pool"))},
        metrics,
    )
    await probes.start()
    run_file = health.write_health_file(
        settings.data_dir, SERVICE, settings.health_host, probes.port
    )
    if threading.current_thread() is threading.main_thread():  # signals only reach that one
        _stop_on_signals(server)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started and not task.done():  # noqa: ASYNC110 - uvicorn has no event
        await asyncio.sleep(0.05)
    if server.started:
        probes.phase = "running"
        target = url_file(settings.data_dir)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps({"url": url, "pid": os.getpid()}))
        log.info("gateway_started", url=url)
    try:
        await task
    finally:
        probes.phase = "stopping"
        with contextlib.suppress(OSError):
            url_file(settings.data_dir).unlink()
        health.remove_health_file(run_file)
        await probes.stop()
    return 0 if server.started else 1


def _stop_on_signals(server: uvicorn.Server) -> None:
    """A stop signal asks the server to shut down gracefully. uvicorn catches SIGTERM and
    SIGINT itself while it serves, shuts down, then raises each caught signal again for the
    handler it found: with Python's defaults the process then died of it (`tavern up` showed
    "stopped with code -15" after a clean shutdown); with this one it exits 0."""

    def stop(signum: int, frame: object) -> None:
        server.should_exit = True

    for stop_signal in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stop_signal, stop)


def main() -> None:
    filemodes.private_umask()
    settings = GatewaySettings()
    configure_logging(SERVICE, settings.log_level, settings.log_format)
    tracing.configure_tracing(SERVICE, settings.otlp_endpoint)
    try:
        code = asyncio.run(serve(settings))
    except TavernError as exc:
        log.error("service_misconfigured", error=exc.message)
        code = 1
    finally:
        tracing.shutdown_tracing()
    raise SystemExit(code)
