"""The JetStream streams of the contract (DESIGN.md §2), as plain data.

Provisioning (`tavern_runtime.provision`) turns these into server configs; services only bind.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tavern_events import subjects

DAY = 24 * 3600


@dataclass(frozen=True)
class StreamSpec:
    """What a stream must look like. Fields mirror JetStream's stream config."""

    name: str
    subjects: tuple[str, ...]
    description: str
    max_age_s: float = 0  # 0 = keep forever
    duplicate_window_s: float = 120
    replicas: int = 1
    deny_delete: bool = True
    allow_direct: bool = True
    allow_atomic: bool = True
    extra: dict[str, object] = field(default_factory=dict)

    def with_replicas(self, replicas: int) -> StreamSpec:
        return StreamSpec(
            self.name,
            self.subjects,
            self.description,
            self.max_age_s,
            self.duplicate_window_s,
            replicas,
            self.deny_delete,
            self.allow_direct,
            self.allow_atomic,
            dict(self.extra),
        )


SESSIONS = StreamSpec(
    "SESSIONS",
    (subjects.SESSIONS_ALL,),
    "Session logs: the single source of truth.",
    extra={"allow_batched": True},  # the loop pipelines a turn's appends (fast-ingest batches)
)
INPUTS = StreamSpec(
    "INPUTS",
    (subjects.INPUTS_ALL,),
    "User messages and commands for the loop; claims are recorded in the session log.",
    max_age_s=7 * DAY,
)
LEDGER = StreamSpec("LEDGER", (subjects.LEDGER_ALL,), "Facts the ledger committed.")
ASSETS = StreamSpec("ASSETS", (subjects.ASSETS_ALL,), "Character cards, lorebooks, personas.")
DLQ = StreamSpec(
    "DLQ",
    (subjects.DLQ_ALL,),
    "Poison messages with the reason and the consumer that gave up.",
    max_age_s=14 * DAY,
)

ALL: tuple[StreamSpec, ...] = (SESSIONS, INPUTS, LEDGER, ASSETS, DLQ)
BY_NAME: dict[str, StreamSpec] = {s.name: s for s in ALL}
