"""What an operator tool (the `tavern` CLI) may call on the projector: its public surface.

Everything else in `tavern_projector` is the service's own and may change without notice; a
test (tests/unit/contract/test_import_graph.py) keeps the CLI to this module. Cards are read
and published by `tavern_runtime.cards`, shared with the gateway.
"""

from __future__ import annotations

from tavern_projector import catalog, export, operations, queries, restore
from tavern_projector.config import ProjectorSettings
from tavern_projector.core import options_of
from tavern_projector.export import Exported

__all__ = [
    "Exported",
    "ProjectorSettings",
    "catalog",
    "export",
    "operations",
    "options_of",
    "queries",
    "restore",
]
