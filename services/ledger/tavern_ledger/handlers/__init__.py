"""Every subscriber and RPC of the ledger service: the registration table."""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

from faststream.nats import NatsBroker

from tavern_events import subjects
from tavern_ledger.config import LedgerSettings
from tavern_ledger.handlers import claims, consolidation, rights, stores
from tavern_ledger.ledger import SERVICE

VERSION = version("tavern-ledger")
RPC_QUEUE = f"{SERVICE}-rpc"

RPCS: dict[str, Any] = {
    "recall": rights.recall,
    "query": rights.query,
    "inspect": rights.inspect,
    "history": rights.history,
    "correct": rights.correct,
    "release": rights.transition("release"),
    "quarantine": rights.transition("quarantine"),
    "redact": rights.transition("redact"),
    "delete": rights.transition("delete"),
    "rollback": rights.transition("rollback"),
    "export": rights.export,
    "import": rights.import_,
    "stats": rights.stats,
    "audit": rights.audit,
    "observation.propose": rights.propose,
    "observation.propose_batch": rights.propose_batch,
    "observation.list": rights.observation_list,
    "observation.release": rights.observation_release,
    "claim.supersede": claims.supersede,
}
"""`tavern.rpc.ledger.<op>` -> handler (request/reply, one queue group across replicas)."""


def register(broker: NatsBroker, settings: LedgerSettings) -> stores.StoreHandlers:
    """Bind every handler of the service to `broker`; returns the stores' handlers, whose
    bindings consumer the app starts after the broker."""
    broker.subscriber(subjects.rpc(SERVICE, "ping"), queue=RPC_QUEUE)(ping)
    for op, handler in RPCS.items():
        broker.subscriber(subjects.rpc(SERVICE, op), queue=RPC_QUEUE)(handler)
    store_handlers = stores.register(broker, settings)
    consolidation.register(broker)
    # Ingestion (SESSIONS -> evidence) and the stores' bindings are not FastStream subscribers:
    # `Ledger.consumer` and `StoreHandlers.bindings_consumer` read their durables in ordered
    # batches; the app starts them after the broker.
    return store_handlers


async def ping() -> dict[str, object]:
    """`tavern.rpc.ledger.ping`: which service and version answered over the bus."""
    return {"service": SERVICE, "version": VERSION, "ok": True}
