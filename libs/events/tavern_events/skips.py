"""What a tolerant reader passed over: unknown event types and newer versions, counted."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

SkipReason = Literal["unknown_type", "newer_version"]


@dataclass(frozen=True)
class Skipped:
    """A well-formed event this code does not know; the reader moves on."""

    reason: SkipReason
    type: str
    v: int


@dataclass
class SkipCounter:
    """Counts skips by reason and by type (pure; export them as metrics at the edge)."""

    by_reason: Counter[str] = field(default_factory=Counter)
    by_type: Counter[str] = field(default_factory=Counter)

    def add(self, skip: Skipped) -> None:
        self.by_reason[skip.reason] += 1
        self.by_type[skip.type] += 1

    @property
    def total(self) -> int:
        return sum(self.by_reason.values())
