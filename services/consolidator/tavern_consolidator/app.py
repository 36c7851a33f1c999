"""The consolidator's composition root: broker, lifespan (pool and migrations), handlers, and
the use cases (`Consolidator`) whose consumers and worker start after the broker connected.

Streams and the two durable consumers are provisioned by `tavern init` / `tavern up`; the
consumers bind (creating a missing durable from its spec) and the service is ready only once
its streams exist.
"""

from __future__ import annotations

from faststream import ContextRepo, FastStream
from faststream.specification import AsyncAPI

from tavern_consolidator import consolidator, handlers
from tavern_consolidator.config import ConsolidatorSettings
from tavern_events import streams
from tavern_llm import LLMConfig
from tavern_runtime.bus import build_broker
from tavern_runtime.logs import get_logger
from tavern_runtime.migrations import MigrationSet, load_migrations
from tavern_runtime.provision import ConsumerSpec, durables_of
from tavern_runtime.service import RESOURCES_KEY, ServiceResources, postgres_lifespan
from tavern_runtime.unknownops import UnknownOperations

SERVICE = consolidator.SERVICE
SCHEMA = "consolidator"
STREAMS: tuple[str, ...] = (streams.LEDGER.name, streams.SESSIONS.name)
"""Streams the service reads or writes: readiness fails while one is missing."""
CONSUMERS: tuple[ConsumerSpec, ...] = (
    consolidator.ledger_consumer(),
    consolidator.sessions_consumer(),
)
"""Durable consumers of the service, created by provisioning."""


def migrations() -> MigrationSet:
    """The `sql/NNN_<what>.sql` migrations of the `consolidator` schema."""
    return load_migrations(SCHEMA, "tavern_consolidator")


def build_app(settings: ConsolidatorSettings, llm: LLMConfig | None = None) -> FastStream:
    """The only wiring of the service; opens nothing until the app starts. The model comes
    from `TAVERN_LLM_*` unless `llm` is given."""
    broker = build_broker(settings, SERVICE, rpc_deadline_s=settings.consolidator_rpc_deadline_s)
    handlers.register(broker)
    resources = ServiceResources(streams=STREAMS, postgres=True, durables=durables_of(CONSUMERS))
    service = consolidator.Consolidator(settings, resources, broker, llm or LLMConfig())
    context = ContextRepo()
    context.set_global(RESOURCES_KEY, resources)
    context.set_global(consolidator.CONSOLIDATOR_KEY, service)
    lifespan = postgres_lifespan(
        settings, migrations(), resources, max_size=settings.consolidator_pool_max
    )
    app = FastStream(
        broker,
        context=context,
        lifespan=lifespan,
        logger=get_logger("faststream"),
        specification=AsyncAPI(title="tavern-consolidator", version=handlers.VERSION),
    )
    app.after_startup(service.start)
    unknown = UnknownOperations(broker, SERVICE, settings)
    app.after_startup(unknown.start)
    app.on_shutdown(unknown.stop)
    app.on_shutdown(service.stop)
    return app
