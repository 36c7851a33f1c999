"""Every subscriber and RPC of the consolidator service: the registration table."""

from __future__ import annotations

from importlib.metadata import version

from faststream.nats import NatsBroker

from tavern_events import subjects

SERVICE = "consolidator"
VERSION = version("tavern-consolidator")
RPC_QUEUE = f"{SERVICE}-rpc"


def register(broker: NatsBroker) -> None:
    """Bind every handler of the service to `broker`."""
    broker.subscriber(subjects.rpc(SERVICE, "ping"), queue=RPC_QUEUE)(ping)


async def ping() -> dict[str, object]:
    """`tavern.rpc.consolidator.ping`: which service and version answered over the bus."""
    return {"service": SERVICE, "version": VERSION, "ok": True}
