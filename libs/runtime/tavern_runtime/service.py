"""The one way a service process runs: logging, the app from `build_app(settings)`, health,
signals, and a graceful shutdown that finishes (or returns) in-flight work.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

import structlog
from faststream import FastStream

from tavern_runtime import collector, filemodes, health, pg, tracing
from tavern_runtime.bus import EXIT_CONNECTION_LOST as EXIT_CONNECTION_LOST
from tavern_runtime.errors import TavernError
from tavern_runtime.logs import configure_logging
from tavern_runtime.metrics import Metrics, consumer_lags, jetstream_durables, metrics_middleware
from tavern_runtime.migrations import MigrationSet, migrate
from tavern_runtime.settings import TavernSettings

log = structlog.get_logger(__name__)

S = TypeVar("S", bound=TavernSettings)

RESOURCES_KEY = "tavern"
"""Context key of the app's `ServiceResources`; handlers take `Context("tavern.pool")`."""

EXIT_OK = 0
EXIT_FAILED = 1
POOL_CLOSE_TIMEOUT_S = 10.0


@dataclass
class ServiceResources:
    """What a service's app shares with the runner (readiness) and its handlers."""

    streams: tuple[str, ...] = ()
    postgres: bool = False
    pool: pg.Pool | None = None
    durables: tuple[tuple[str, str], ...] = ()
    """(stream, consumer) of the durable consumers the service reads with its own pull loops
    (not FastStream subscribers): `/metrics` reports their lag too."""


def resources_of(app: FastStream) -> ServiceResources:
    found = app.context.get(RESOURCES_KEY)
    return found if isinstance(found, ServiceResources) else ServiceResources()


def postgres_lifespan(
    settings: TavernSettings,
    migrations: MigrationSet,
    resources: ServiceResources,
    *,
    max_size: int = 10,
) -> Callable[[], contextlib.AbstractAsyncContextManager[None]]:
    """A FastStream lifespan: open the pool, migrate the service's schema, close at the end."""

    @asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        pool = await pg.create_pool(pg.require_dsn(settings), max_size=max_size)
        try:
            await migrate(pool, migrations)
            resources.pool = pool
            yield
        finally:
            resources.pool = None
            await _close_pool(pool)

    return lifespan


async def _close_pool(pool: pg.Pool) -> None:
    try:
        await asyncio.wait_for(pool.close(), POOL_CLOSE_TIMEOUT_S)
    except TimeoutError:
        log.warning("pool_close_timeout", timeout_s=POOL_CLOSE_TIMEOUT_S)
        pool.terminate()


def run_service(name: str, build_app: Callable[[S], FastStream], settings: S) -> NoReturn:
    """Configure logging and tracing, build the app, serve until SIGTERM/SIGINT, exit with the
    outcome (the spans still buffered exported first)."""
    filemodes.private_umask()
    configure_logging(name, settings.log_level, settings.log_format)
    tracing.configure_tracing(name, settings.otlp_endpoint)
    yield_cpu(settings.niceness)
    try:
        app = build_app(settings)
    except TavernError as exc:
        log.error("service_misconfigured", error=exc.message)
        sys.exit(EXIT_FAILED)
    collector.settle()
    try:
        code = asyncio.run(serve(name, app, settings))
    finally:
        tracing.shutdown_tracing()
    sys.exit(code)


def yield_cpu(niceness: int) -> None:
    """Lower the process's scheduling priority to `niceness` (never raise it: that needs a
    privilege, and a process started nicer than asked stays so).

    Niceness orders the processes of one scheduling group only. Linux's autogroup
    (`/proc/sys/kernel/sched_autogroup_enabled`, on by default in most distributions) makes
    each session a group of its own, and groups share the CPU equally whatever their
    processes' niceness: so `tavern up` and the test stack start every service, and
    nats-server, in the supervisor's session (a new process group each, for signals, never a
    new session). Started each in a session of its own, the background services' niceness did
    nothing, and a service woken by a reply waited for whichever group held the CPU. In a
    container, the container's cgroup is the group: give the turn path's services the larger
    CPU share there (`deploy/README.md`)."""
    if niceness <= 0:
        return
    try:
        now = os.getpriority(os.PRIO_PROCESS, 0)
        if niceness > now:
            os.setpriority(os.PRIO_PROCESS, 0, niceness)
    except OSError as exc:  # e.g. a seccomp profile that refuses it: run as started
        log.warning("niceness_not_set", niceness=niceness, error=str(exc))
        return
    log.info("niceness_set", niceness=max(niceness, now))


async def serve(
    name: str, app: FastStream, settings: TavernSettings, stop: asyncio.Event | None = None
) -> int:
    """Run `app` with its health endpoint until `stop` is set (default: on SIGTERM/SIGINT);
    return the exit code."""
    metrics = Metrics(name)
    _broker(app).insert_middleware(metrics_middleware(metrics))
    probes = _health_server(name, app, metrics, settings)
    try:
        await probes.start()
    except OSError as exc:
        log.error("health_port_unavailable", port=settings.health_port, error=str(exc))
        return EXIT_FAILED
    run_file = health.write_health_file(settings.data_dir, name, settings.health_host, probes.port)
    own_signals = stop is None
    stop = _stop_on_signals() if stop is None else stop
    try:
        return await _run(app, probes, stop, settings.shutdown_grace_s)
    finally:
        if own_signals:
            _restore_signals()
        health.remove_health_file(run_file)
        await probes.stop()


async def _run(
    app: FastStream, probes: health.HealthServer, stop: asyncio.Event, grace_s: float
) -> int:
    try:
        async with app.lifespan_context():
            return await _run_started(app, probes, stop, grace_s)
    except TavernError as exc:
        log.error("service_failed", error=exc.message, code=exc.code)
    except Exception as exc:
        log.exception("service_crashed", error=repr(exc))
    return EXIT_FAILED


async def _run_started(
    app: FastStream, probes: health.HealthServer, stop: asyncio.Event, grace_s: float
) -> int:
    try:
        if not await _start(app, stop):
            log.info("service_stopped_while_starting")
            return EXIT_OK
        probes.phase = "running"
        log.info("service_started", health_port=probes.port)
        code = await _wait_for_exit(stop, _broker(app))
    finally:
        probes.phase = "stopping"
        code_on_stop = await _stop_app(app, grace_s)
    return code if code != EXIT_OK else code_on_stop


async def _start(app: FastStream, stop: asyncio.Event) -> bool:
    """Start the broker unless a stop comes first (connecting retries forever while NATS is
    away, and a stop signal must still end the process)."""
    starting = asyncio.create_task(app.start())
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    if starting.done():
        starting.result()  # re-raise a failed start
        return True
    starting.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await starting
    return False


async def _wait_for_exit(stop: asyncio.Event, broker: Any) -> int:
    """EXIT_OK on a stop signal; EXIT_CONNECTION_LOST if NATS closed the connection for good."""
    while True:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.5)
            log.info("service_stopping")
            return EXIT_OK
        nc = getattr(broker, "_connection", None)
        if nc is not None and nc.is_closed:
            log.critical("nats_connection_closed")
            return EXIT_CONNECTION_LOST


async def _stop_app(app: FastStream, grace_s: float) -> int:
    """Stop the broker (it waits for in-flight handlers) within the grace period."""
    try:
        await asyncio.wait_for(app.stop(), grace_s + 1)
    except TimeoutError:
        # Unacknowledged JetStream messages are redelivered: in-flight work is returned.
        log.error("shutdown_grace_exceeded", grace_s=grace_s)
        return EXIT_FAILED
    except Exception as exc:  # e.g. draining a connection that is already closed
        log.error("shutdown_failed", error=repr(exc))
        return EXIT_FAILED
    log.info("service_stopped")
    return EXIT_OK


def _broker(app: FastStream) -> Any:
    if app.broker is None:
        raise TavernError("the app has no broker")
    return app.broker


def _health_server(
    name: str, app: FastStream, metrics: Metrics, settings: TavernSettings
) -> health.HealthServer:
    broker = _broker(app)
    resources = resources_of(app)

    def connection() -> Any:
        return getattr(broker, "_connection", None)

    checks: dict[str, health.Check] = {
        "nats": health.jetstream_check(connection, resources.streams)
    }
    if resources.postgres:
        checks["postgres"] = health.postgres_check(lambda: resources.pool)

    async def render_metrics() -> str:
        nc = connection()
        lags = []
        if nc is not None and nc.is_connected:
            durables = dict.fromkeys([*resources.durables, *jetstream_durables(broker.subscribers)])
            lags = await consumer_lags(nc.jetstream(), durables)
        return metrics.render(lags)

    return health.HealthServer(
        name, settings.health_host, settings.health_port, checks, render_metrics
    )


def _stop_on_signals() -> asyncio.Event:
    """SIGTERM/SIGINT set the returned event; a second signal exits at once."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal(signum: int) -> None:
        if stop.is_set():
            log.warning("shutdown_forced", signal=signal.Signals(signum).name)
            os._exit(EXIT_FAILED)
        log.info("signal_received", signal=signal.Signals(signum).name)
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum)
    return stop


def _restore_signals() -> None:
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.remove_signal_handler(signum)
