"""The ledger's composition root: broker, lifespan (pool and migrations), handlers.

Streams and the `ledger-ingest` consumer are provisioned by `tavern init` / `tavern up`;
subscribers bind with `JStream(name, declare=False)` and the service is ready only once its
streams exist.
"""

from __future__ import annotations

from faststream import ContextRepo, FastStream
from faststream.specification import AsyncAPI

from tavern_events import streams
from tavern_ledger import handlers
from tavern_ledger.config import LedgerSettings
from tavern_ledger.embedding import shared_encoder
from tavern_ledger.handlers import stores
from tavern_ledger.ledger import LEDGER_KEY, Ledger, ingest_consumer, pool_of
from tavern_ledger.ledger import SERVICE as LEDGER_SERVICE
from tavern_ledger.vectors.index import PgVectorIndex
from tavern_runtime.bus import build_broker
from tavern_runtime.logs import get_logger
from tavern_runtime.migrations import MigrationSet, load_migrations
from tavern_runtime.provision import ConsumerSpec, durables_of
from tavern_runtime.service import RESOURCES_KEY, ServiceResources, postgres_lifespan
from tavern_runtime.unknownops import UnknownOperations

SERVICE = LEDGER_SERVICE
SCHEMA = "ledger"
STREAMS: tuple[str, ...] = (streams.LEDGER.name, streams.SESSIONS.name)
"""Streams the service reads or writes: readiness fails while one is missing."""
CONSUMERS: tuple[ConsumerSpec, ...] = (ingest_consumer(), stores.BINDINGS_CONSUMER)
"""Durable consumers of the service, created by provisioning."""
EXTENSIONS: tuple[str, ...] = ("vector",)
"""PostgreSQL extensions the schema uses, created by an administrator (`tavern init` / `up`);
without `vector` the service runs with no semantic channel."""


def migrations() -> MigrationSet:
    """The `sql/NNN_<what>.sql` migrations of the `ledger` schema."""
    return load_migrations(SCHEMA, "tavern_ledger")


def build_app(settings: LedgerSettings) -> FastStream:
    """The only wiring of the service; opens nothing until the app starts."""
    # The guard refuses what the ledger would refuse anyway before parsing it (floods stay cheap).
    broker = build_broker(
        settings, SERVICE, rpc_max_request_bytes=settings.ledger_rpc_max_request_bytes
    )
    store_handlers = handlers.register(broker, settings)
    resources = ServiceResources(streams=STREAMS, postgres=True, durables=durables_of(CONSUMERS))
    bindings = store_handlers.bindings_consumer(resources)
    context = ContextRepo()
    context.set_global(RESOURCES_KEY, resources)
    vectors = PgVectorIndex(pool_of(resources), shared_encoder())
    ledger = Ledger(
        settings, resources, broker, vectors=vectors if settings.ledger_semantic else None
    )
    context.set_global(LEDGER_KEY, ledger)
    lifespan = postgres_lifespan(
        settings, migrations(), resources, max_size=settings.ledger_pool_max
    )
    app = FastStream(
        broker,
        context=context,
        lifespan=lifespan,
        logger=get_logger("faststream"),
        specification=AsyncAPI(title="tavern-ledger", version=handlers.VERSION),
    )

    async def start_bindings() -> None:
        nc = broker.connection
        bindings.start(nc, nc.jetstream(timeout=5.0))

    app.after_startup(ledger.start)
    app.after_startup(start_bindings)
    unknown = UnknownOperations(broker, SERVICE, settings)
    app.after_startup(unknown.start)
    app.on_shutdown(unknown.stop)
    app.on_shutdown(ledger.stop)
    app.on_shutdown(bindings.stop)
    return app
