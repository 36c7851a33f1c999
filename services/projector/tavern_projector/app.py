"""The projector's composition root: broker, lifespan (pool, migrations, outdated rebuilds),
handlers.

Streams and consumers are provisioned by `tavern init` / `tavern up`; subscribers bind with
`JStream(name, declare=False)` and the service is ready only once its streams exist.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable

from faststream import ContextRepo, FastStream
from faststream.specification import AsyncAPI

from tavern_events import streams
from tavern_projector import catalog, handlers
from tavern_projector.config import ProjectorSettings
from tavern_projector.core import Core
from tavern_projector.startup import rebuild_if_outdated
from tavern_runtime.bus import build_broker
from tavern_runtime.logs import get_logger
from tavern_runtime.migrations import MigrationSet, load_migrations
from tavern_runtime.provision import ConsumerSpec, durables_of
from tavern_runtime.service import RESOURCES_KEY, ServiceResources, postgres_lifespan
from tavern_runtime.unknownops import UnknownOperations

SERVICE = handlers.SERVICE
SCHEMA = "projector"
STREAMS: tuple[str, ...] = (streams.SESSIONS.name, streams.LEDGER.name, streams.ASSETS.name)
"""Streams the service reads or writes: readiness fails while one is missing."""
CONSUMERS: tuple[ConsumerSpec, ...] = catalog.CONSUMERS
"""Durable consumers of the service, created by provisioning."""


def migrations() -> MigrationSet:
    """The `sql/NNN_<what>.sql` migrations of the `projector` schema."""
    return load_migrations(SCHEMA, "tavern_projector")


def build_app(settings: ProjectorSettings) -> FastStream:
    """The only wiring of the service; opens nothing until the app starts."""
    broker = build_broker(settings, SERVICE)
    resources = ServiceResources(streams=STREAMS, postgres=True, durables=durables_of(CONSUMERS))
    core = Core(settings, resources)
    core.broker = broker
    handlers.register(broker, core)
    context = ContextRepo()
    context.set_global(RESOURCES_KEY, resources)
    unknown = UnknownOperations(broker, SERVICE, settings)
    return FastStream(
        broker,
        context=context,
        lifespan=_lifespan(settings, resources, core),
        after_startup=[core.start_consumers, unknown.start],
        on_shutdown=[core.stop_consumers, unknown.stop],
        logger=get_logger("faststream"),
        specification=AsyncAPI(title="tavern-projector", version=handlers.VERSION),
    )


def _lifespan(
    settings: ProjectorSettings, resources: ServiceResources, core: Core
) -> Callable[[], contextlib.AbstractAsyncContextManager[None]]:
    postgres = postgres_lifespan(
        settings, migrations(), resources, max_size=settings.projector_pool_max
    )

    @contextlib.asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        async with postgres():
            if settings.projector_rebuild_on_start:
                await rebuild_if_outdated(settings, core.pool(), core.options)
            yield

    return lifespan
