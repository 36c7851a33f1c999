"""The services of AgentTavern, as the CLI knows them: name, package, colour.

Each service package has `app.py` with `SERVICE`, `STREAMS`, `CONSUMERS`, `migrations()` and
`build_app(settings)`, and `__main__.py` with `main()`. Modules are imported on demand.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

from tavern_runtime.migrations import MigrationSet
from tavern_runtime.provision import ConsumerSpec


@dataclass(frozen=True)
class ServiceEntry:
    name: str
    colour: str  # ANSI SGR colour code of its `[name]` prefix

    @property
    def package(self) -> str:
        return f"tavern_{self.name}"

    @property
    def command(self) -> list[str]:
        """The argv after the interpreter: `-m tavern_<name>`."""
        return ["-m", self.package]

    def app(self) -> ModuleType:
        return importlib.import_module(f"{self.package}.app")

    def migrations(self) -> MigrationSet | None:
        found: MigrationSet | None = self.app().migrations()
        return found

    def extensions(self) -> tuple[str, ...]:
        """The PostgreSQL extensions its schema uses (an administrator creates them)."""
        return tuple(getattr(self.app(), "EXTENSIONS", ()))

    def consumers(self) -> tuple[ConsumerSpec, ...]:
        return tuple(self.app().CONSUMERS)


SERVICES: tuple[ServiceEntry, ...] = (
    ServiceEntry("loop", "36"),
    ServiceEntry("ledger", "35"),
    ServiceEntry("consolidator", "33"),
    ServiceEntry("projector", "32"),
)
"""The services on the bus (FastStream apps)."""
GATEWAY = ServiceEntry("gateway", "34")
"""The web app and HTTP API (an ASGI app on uvicorn), the only thing a browser talks to."""
ALL: tuple[ServiceEntry, ...] = (*SERVICES, GATEWAY)
"""Every process `tavern up` runs."""
BY_NAME: dict[str, ServiceEntry] = {s.name: s for s in ALL}


def all_extensions() -> dict[str, tuple[str, ...]]:
    """schema (the service's role) -> the extensions it uses, for every service that has any."""
    found = {}
    for entry in ALL:
        migrations = entry.migrations()
        if migrations is not None and entry.extensions():
            found[migrations.schema] = entry.extensions()
    return found


def all_consumers() -> tuple[ConsumerSpec, ...]:
    """Every durable consumer any service declares, for provisioning."""
    return tuple(c for s in SERVICES for c in s.consumers())
