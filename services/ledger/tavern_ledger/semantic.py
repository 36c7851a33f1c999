"""The semantic channel's seam: an index that scores evidence by meaning. The default indexes
nothing and finds nothing, so recall runs on the lexical channel alone."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from tavern_ledger.domain.records import EvidenceRow


@dataclass(frozen=True)
class SemanticHit:
    evidence_id: str
    score: float
    """In [0, 1]; higher is closer."""


class SemanticIndex(Protocol):
    async def search(self, scope_id: str, query: str, limit: int) -> Sequence[SemanticHit]:
        """The evidence of `scope_id` closest to `query`, best first."""
        ...

    async def index(self, rows: Sequence[EvidenceRow]) -> None:
        """Take in newly committed evidence (called after the commit; may lag)."""
        ...


class NoSemanticIndex:
    """The default: no semantic channel."""

    async def search(self, scope_id: str, query: str, limit: int) -> Sequence[SemanticHit]:
        return ()

    async def index(self, rows: Sequence[EvidenceRow]) -> None:
        return None
