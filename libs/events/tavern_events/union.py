"""The discriminated unions of every contract event, their registry, and the codec.

`encode` writes compact JSON; `decode` upcasts and validates; `decode_or_skip` is the tolerant
reader (unknown types and newer versions are skipped and counted, malformed data raises).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Generic, TypeAlias, TypeVar, cast, get_args, overload

from pydantic import Field, TypeAdapter, ValidationError

from tavern_events import subjects
from tavern_events.asset import AssetImported, AssetRemoved, AssetUpdated
from tavern_events.chat import ChatImported, ChatLine
from tavern_events.context import ContextCompacted, ContextCompactionSkipped
from tavern_events.envelope import (
    AssetEvent,
    Envelope,
    InputCommand,
    LedgerFact,
    Model,
    SessionEvent,
)
from tavern_events.errors import ContractError, UnknownEventError
from tavern_events.group import MemberAdded, MemberMuted, MemberRemoved, MemberUnmuted
from tavern_events.input import CancelInput, CommandInput, MessageInput
from tavern_events.ledger import (
    EvidenceAppended,
    EvidenceStateChanged,
    MemoryChanged,
    ObservationUpserted,
    RuleChanged,
    VariableChanged,
)
from tavern_events.message import AssistantChunk, AssistantMessage, UserMessage
from tavern_events.request import AgentRequest, AgentRetry, RequestProjection
from tavern_events.session import SessionBindingChanged, SessionCreated, SessionForked
from tavern_events.skips import SkipCounter, Skipped
from tavern_events.step import StepEnded, StepStarted
from tavern_events.tool import ToolCall, ToolResult
from tavern_events.turn import TurnEnded, TurnStarted, TurnStopping
from tavern_events.upcasters import upcast

SessionEventUnion = Annotated[
    SessionCreated
    | SessionBindingChanged
    | SessionForked
    | TurnStarted
    | TurnStopping
    | TurnEnded
    | StepStarted
    | StepEnded
    | UserMessage
    | AssistantChunk
    | AssistantMessage
    | AgentRequest
    | AgentRetry
    | RequestProjection
    | ToolCall
    | ToolResult
    | ContextCompacted
    | ContextCompactionSkipped
    | ChatImported
    | ChatLine
    | MemberAdded
    | MemberRemoved
    | MemberMuted
    | MemberUnmuted,
    Field(discriminator="type"),
]
InputUnion = Annotated[MessageInput | CancelInput | CommandInput, Field(discriminator="type")]
LedgerFactUnion = Annotated[
    EvidenceAppended
    | EvidenceStateChanged
    | ObservationUpserted
    | MemoryChanged
    | VariableChanged
    | RuleChanged,
    Field(discriminator="type"),
]
AssetEventUnion = Annotated[
    AssetImported | AssetUpdated | AssetRemoved, Field(discriminator="type")
]
AnyEvent: TypeAlias = SessionEventUnion | InputUnion | LedgerFactUnion | AssetEventUnion
"""Any event of the contract (for `match` and `isinstance` on the concrete classes)."""

EventModel: TypeAlias = (
    type[SessionEvent] | type[InputCommand] | type[LedgerFact] | type[AssetEvent]
)

SESSION_EVENT_ADAPTER: TypeAdapter[SessionEventUnion] = TypeAdapter(SessionEventUnion)
INPUT_ADAPTER: TypeAdapter[InputUnion] = TypeAdapter(InputUnion)
LEDGER_FACT_ADAPTER: TypeAdapter[LedgerFactUnion] = TypeAdapter(LedgerFactUnion)
ASSET_EVENT_ADAPTER: TypeAdapter[AssetEventUnion] = TypeAdapter(AssetEventUnion)


def _members(union: object) -> tuple[Any, ...]:
    return get_args(get_args(union)[0])


SESSION_EVENT_MODELS: tuple[type[SessionEvent], ...] = _members(SessionEventUnion)
INPUT_MODELS: tuple[type[InputCommand], ...] = _members(InputUnion)
LEDGER_FACT_MODELS: tuple[type[LedgerFact], ...] = _members(LedgerFactUnion)
ASSET_EVENT_MODELS: tuple[type[AssetEvent], ...] = _members(AssetEventUnion)


def _type_of(model: EventModel) -> str:
    return cast(str, model.model_fields["type"].default)


EVENT_MODELS: dict[str, EventModel] = {
    _type_of(model): model
    for family in (SESSION_EVENT_MODELS, INPUT_MODELS, LEDGER_FACT_MODELS, ASSET_EVENT_MODELS)
    for model in family
}
"""Every event type of the contract -> its model."""

CURRENT_VERSIONS: dict[str, int] = {
    event_type: cast(int, model.model_fields["v"].default)
    for event_type, model in EVENT_MODELS.items()
}
"""Every event type -> the version this code writes (older ones are upcast on read)."""


RawData: TypeAlias = bytes | str | Mapping[str, Any]
"""What `decode` reads: message bytes, a JSON string, or an already parsed dict."""

T = TypeVar("T")
E = TypeVar("E", bound=Model)


@dataclass(frozen=True)
class Decoded(Generic[T]):
    """A known event, upcast to its current version and validated."""

    event: T


# --- writing ------------------------------------------------------------------------------------


def encode(event: Envelope) -> bytes:
    """Compact JSON of a contract event (fields that are None are left out)."""
    if EVENT_MODELS.get(event.type) is not type(event):
        raise ContractError(f"not a registered contract event: {type(event).__name__}")
    return event.model_dump_json(exclude_none=True).encode()


def subject_for(event: Envelope) -> str:
    """The NATS subject an event is published on."""
    if isinstance(event, SessionEvent):
        return subjects.session_event(event.session_id, event.type)
    if isinstance(event, InputCommand):
        return subjects.session_input(event.session_id, event.type.partition("/")[2])
    if isinstance(event, LedgerFact):
        return subjects.ledger_fact(event.scope_id, event.type)
    return subjects.asset_event(event.payload.kind, event.asset_id, event.type)


def msg_id_for(event: Envelope) -> str:
    """The `Nats-Msg-Id` of an event: its id (an input's `input_id`)."""
    return event.input_id if isinstance(event, InputCommand) else event.id


# --- reading ------------------------------------------------------------------------------------


@overload
def decode(data: RawData) -> AnyEvent: ...
@overload
def decode(data: RawData, expect: type[E]) -> E: ...
def decode(data: RawData, expect: type[Model] | None = None) -> Model:
    """Parse, upcast and validate one event; `expect` narrows it (`decode(raw, SessionEvent)`).

    Raises `ContractError` for malformed data (or an event that is not an `expect`), and
    `UnknownEventError` for an unknown type or a version newer than this code.
    """
    event = _decode(data)
    if expect is not None and not isinstance(event, expect):
        raise ContractError(f"expected {expect.__name__}, got {event.type}")
    return event


@overload
def decode_or_skip(
    data: RawData, counter: SkipCounter | None = None
) -> Decoded[AnyEvent] | Skipped: ...
@overload
def decode_or_skip(
    data: RawData, counter: SkipCounter | None, expect: type[E]
) -> Decoded[E] | Skipped: ...
def decode_or_skip(
    data: RawData, counter: SkipCounter | None = None, expect: type[Model] | None = None
) -> Decoded[Any] | Skipped:
    """Like `decode`, but an unknown type or newer version is returned as a counted `Skipped`.

    Malformed data still raises `ContractError` (dead-letter it; never skip it).
    """
    try:
        return Decoded(decode(data) if expect is None else decode(data, expect))
    except UnknownEventError as exc:
        skipped = exc.skipped
    if counter is not None:
        counter.add(skipped)
    return skipped


def _decode(data: RawData) -> AnyEvent:
    raw = _load(data)
    event_type, version = _type_and_version(raw)
    model = EVENT_MODELS.get(event_type)
    if model is None:
        raise UnknownEventError(Skipped("unknown_type", event_type, version))
    current = CURRENT_VERSIONS[event_type]
    if version > current:
        raise UnknownEventError(Skipped("newer_version", event_type, version))
    return _validate(model, upcast(raw, event_type, version, current))


def _load(data: RawData) -> dict[str, Any]:
    if isinstance(data, Mapping):
        return dict(data)
    try:
        raw = json.loads(data)
    except (ValueError, RecursionError) as exc:  # also UnicodeDecodeError; nesting too deep
        raise ContractError(f"event is not JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise ContractError(f"event must be a JSON object, got {type(raw).__name__}")
    return raw


def _type_and_version(raw: dict[str, Any]) -> tuple[str, int]:
    event_type, version = raw.get("type"), raw.get("v", 1)
    if not isinstance(event_type, str) or "/" not in event_type:
        raise ContractError(f"event has no family/name type: {event_type!r}")
    if type(version) is not int or version < 1:
        raise ContractError(f"event {event_type} has an invalid version: {version!r}")
    return event_type, version


def _validate(model: EventModel, raw: dict[str, Any]) -> AnyEvent:
    try:
        return cast(AnyEvent, model.model_validate(raw))
    except ValidationError as exc:
        raise ContractError(f"invalid {model.__name__}: {_summary(exc)}") from exc


def _summary(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}"
        for err in exc.errors()[:5]
    )
