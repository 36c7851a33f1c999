"""The loop's composition root: broker and handlers. Bus only: no Postgres.

Streams are provisioned by `tavern init` / `tavern up`; subscribers bind with
`JStream(name, declare=False)` and the service is ready only once its streams exist.
"""

from __future__ import annotations

from faststream import ContextRepo, FastStream
from faststream.specification import AsyncAPI

from tavern_events import streams
from tavern_loop import handlers
from tavern_loop.config import LoopSettings
from tavern_loop.dispatch import dispatch_consumer
from tavern_loop.engine import LoopEngine, default_parts
from tavern_runtime.bus import build_broker
from tavern_runtime.logs import get_logger
from tavern_runtime.migrations import MigrationSet
from tavern_runtime.provision import LEASES, ConsumerSpec, durables_of
from tavern_runtime.service import RESOURCES_KEY, ServiceResources
from tavern_runtime.unknownops import UnknownOperations

SERVICE = handlers.SERVICE
STREAMS: tuple[str, ...] = (streams.SESSIONS.name, streams.INPUTS.name, LEASES.stream_name)
"""Streams (and the lease bucket) the service needs: readiness fails while one is missing."""
CONSUMERS: tuple[ConsumerSpec, ...] = (dispatch_consumer(),)
"""Durable consumers of the service, created by provisioning."""


def migrations() -> MigrationSet | None:
    """The loop keeps no tables."""
    return None


def build_app(settings: LoopSettings) -> FastStream:
    """The only wiring of the service; opens nothing until the app starts."""
    broker = build_broker(settings, SERVICE)
    handlers.register(broker)
    context = ContextRepo()
    context.set_global(
        RESOURCES_KEY, ServiceResources(streams=STREAMS, durables=durables_of(CONSUMERS))
    )
    app = FastStream(
        broker,
        context=context,
        logger=get_logger("faststream"),
        specification=AsyncAPI(title="tavern-loop", version=handlers.VERSION),
    )
    engine = LoopEngine(settings, default_parts(settings))

    async def stop_engine() -> None:
        await engine.stop(settings.shutdown_grace_s)

    app.after_startup(engine.start)
    unknown = UnknownOperations(broker, SERVICE, settings)
    app.after_startup(unknown.start)
    app.on_shutdown(unknown.stop)
    app.on_shutdown(stop_engine)
    return app
