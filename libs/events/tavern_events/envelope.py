"""The envelopes shared by every event of the contract (DESIGN.md §2).

Models are frozen. Readers are tolerant (`extra="ignore"`); writers emit only declared fields.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, TypeAlias

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from tavern_events.subjects import ID_PATTERN

SOURCE_PATTERN = r"^(host|user|system|(tool|plugin|agent):[A-Za-z0-9_.:-]{1,64})$"


Id = Annotated[str, Field(pattern=ID_PATTERN)]
"""A subject-safe id: `[A-Za-z0-9_-]{1,64}` (checked by pydantic's own regex engine, where `$`
is the end of the text: no trailing newline slips through)."""

Source = Annotated[str, Field(pattern=SOURCE_PATTERN)]
"""Who produced an event: `host`, `user`, `system`, `tool:<name>`, `plugin:<name>`, `agent:<id>`."""


def utc(ts: datetime) -> datetime:
    """Naive timestamps are refused; aware ones are normalised to UTC."""
    if ts.tzinfo is None:
        raise ValueError("timestamps must be timezone-aware (UTC)")
    return ts.astimezone(UTC)


UtcDatetime = Annotated[datetime, AfterValidator(utc)]


class Model(BaseModel):
    """Base of every contract model: frozen, tolerant of unknown fields on read."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)


class Payload(Model):
    """Base of event payloads."""


class EmptyPayload(Payload):
    pass


class SessionEvent(Model):
    """One entry of a session log (`tavern.session.<sid>.<family>.<name>`).

    `seq` is the 1-based, gapless position in the session's log; 0 means "not yet appended"
    (the session-log writer assigns it).
    """

    id: Id
    type: str
    v: int = 1
    session_id: Id
    seq: int = Field(default=0, ge=0)
    ts: UtcDatetime
    turn: int = Field(default=0, ge=0)
    step: int = Field(default=0, ge=0)
    agent_id: Id = "main"
    actor_id: Id | None = None
    source: Source = "host"
    form: str | None = Field(default=None, pattern=r"^[a-z][a-z0-9_-]{0,31}$")
    causation_id: Id | None = None
    correlation_id: Id | None = None
    payload: Any = None

    @field_validator("type")
    @classmethod
    def _type_shape(cls, value: str) -> str:
        if "/" not in value:
            raise ValueError("type must be family/name")
        return value

    @property
    def family(self) -> str:
        return self.type.partition("/")[0]


class InputCommand(Model):
    """A message or command for a session's loop (`tavern.input.<sid>.<kind>`).

    `input_id` is also the `Nats-Msg-Id`, so a client that retries never submits twice.
    """

    input_id: Id
    type: str
    v: int = 1
    session_id: Id
    ts: UtcDatetime
    actor_id: Id | None = None
    payload: Any = None


class LedgerFact(Model):
    """A fact the ledger committed (`tavern.ledger.<scope>.<family>.<name>`)."""

    id: Id
    type: str
    v: int = 1
    scope_id: Id
    ts: UtcDatetime
    actor: str = "system"
    session_id: Id | None = None
    causation_id: Id | None = None
    payload: Any = None


class AssetEvent(Model):
    """An asset imported, edited or removed (`tavern.asset.<kind>.<id>.<name>`)."""

    id: Id
    type: str
    v: int = 1
    asset_id: Id
    ts: UtcDatetime
    actor: str = "system"
    payload: Any = None


Envelope: TypeAlias = SessionEvent | InputCommand | LedgerFact | AssetEvent
"""Any contract event, typed by its envelope (each concrete event subclasses one of these)."""


__all__ = [
    "ID_PATTERN",
    "AssetEvent",
    "EmptyPayload",
    "Envelope",
    "Id",
    "InputCommand",
    "LedgerFact",
    "Model",
    "Payload",
    "SessionEvent",
    "Source",
    "UtcDatetime",
]
