"""The AsyncAPI 3.0 documents of AgentTavern, generated from the contract (`tavern docs`).

`contract.json` documents every stream channel (with its stream, retention, parameters and
headers) and every RPC of `tavern_events.rpc` (request, reply and the common error); one
document per service holds that service's RPCs. Schemas come from the pydantic models, so a
client can be built from the documents alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any, get_args

from pydantic import BaseModel, RootModel

from tavern_events import rpc, streams, subjects
from tavern_events.asset import AssetKind
from tavern_events.dlq import DeadLetter
from tavern_events.replies import TIMEOUT_HEADER, ErrorReply
from tavern_events.rpc.base import PRINCIPAL_HEADER, REQUEST_HEADERS
from tavern_events.streams import StreamSpec
from tavern_events.union import (
    ASSET_EVENT_MODELS,
    LEDGER_FACT_MODELS,
    SESSION_EVENT_MODELS,
    AssetEventUnion,
    InputUnion,
    LedgerFactUnion,
    SessionEventUnion,
)
from tavern_runtime.tracing import TRACEPARENT, TRACESTATE

SERVICES = rpc.SERVICES
DOCS_DIR = Path("docs") / "asyncapi"
REF = "#/components/schemas/{model}"
NATS_BINDING = "0.1.0"


class SessionEventMessage(RootModel[SessionEventUnion]):
    """One event of a session log (discriminated by `type`)."""


class InputMessage(RootModel[InputUnion]):
    """A message, cancel or command for a session's loop (discriminated by `type`)."""


class LedgerFactMessage(RootModel[LedgerFactUnion]):
    """A fact the ledger committed (discriminated by `type`)."""


class AssetEventMessage(RootModel[AssetEventUnion]):
    """An asset imported or edited (discriminated by `type`)."""


# --- headers ------------------------------------------------------------------------------------

_DIGITS = {"type": "string", "pattern": "^[0-9]+$"}
MSG_ID = "Nats-Msg-Id"
_HEADER_SCHEMAS: dict[str, dict[str, Any]] = {
    MSG_ID: {"type": "string", "description": "Deduplication id (JetStream's window)."},
    "Nats-Expected-Stream": {
        "type": "string",
        "description": "The stream the publish must land in.",
    },
    "Nats-Expected-Last-Subject-Sequence": {
        **_DIGITS,
        "description": "Conditional append: the stream sequence of the session's last message "
        "(0 for an empty log); a stale one is refused with error 10071.",
    },
    "Nats-Expected-Last-Subject-Sequence-Subject": {
        "type": "string",
        "description": "The subject the condition is checked on: `tavern.session.<sid>.>`.",
    },
    "Nats-Batch-Id": {"type": "string", "description": "Atomic batch publish (ADR-50): its id."},
    "Nats-Batch-Sequence": {**_DIGITS, "description": "1-based position in the atomic batch."},
    "Nats-Batch-Commit": {"const": "1", "description": "On the batch's last message: commit."},
    PRINCIPAL_HEADER: {"type": "string", "description": REQUEST_HEADERS[PRINCIPAL_HEADER]},
    TIMEOUT_HEADER: {**_DIGITS, "description": REQUEST_HEADERS[TIMEOUT_HEADER]},
    TRACEPARENT: {
        "type": "string",
        "description": "W3C Trace Context of the span that sent it, present only while tracing "
        "is on (docs/tracing.md): its receiver's span joins that trace.",
    },
    TRACESTATE: {"type": "string", "description": "W3C Trace Context vendor state, with it."},
}
TRACE = (TRACEPARENT, TRACESTATE)


def _headers(names: tuple[str, ...], required: tuple[str, ...], what: str) -> dict[str, Any]:
    return {
        "type": "object",
        "description": what,
        "properties": {n: _HEADER_SCHEMAS[n] for n in names},
        "required": list(required),
        "additionalProperties": {"type": "string"},
    }


# --- stream channels ----------------------------------------------------------------------------

ID_TEXT = f"an id matching {subjects.ID_PATTERN}"


@dataclass(frozen=True)
class StreamChannel:
    key: str
    address: str
    stream: StreamSpec
    payload: type[BaseModel]
    description: str
    parameters: dict[str, dict[str, Any]]
    headers: dict[str, Any]
    correlated: bool = False


def _type_parts(models: tuple[type[BaseModel], ...]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The `family` and `name` parameters of channels whose subjects end in an event type."""
    types = [str(m.model_fields["type"].default) for m in models]
    unknown = " (today's values; a reader skips types it does not know)"
    return (
        {
            "description": f"The event family: the part of `type` before the slash{unknown}.",
            "enum": sorted({t.split("/")[0] for t in types}),
        },
        {
            "description": f"The event name: the part of `type` after the slash{unknown}.",
            "enum": sorted({t.split("/")[1] for t in types}),
        },
    )


def _stream_channels() -> tuple[StreamChannel, ...]:
    session_headers = _headers(
        (
            MSG_ID,
            "Nats-Expected-Last-Subject-Sequence",
            "Nats-Expected-Last-Subject-Sequence-Subject",
            "Nats-Batch-Id",
            "Nats-Batch-Sequence",
            "Nats-Batch-Commit",
            *TRACE,
        ),
        (MSG_ID,),
        "Nats-Msg-Id is the event id; every append is conditional on the session's last "
        "sequence; events that belong together go as one atomic batch.",
    )
    family, name = _type_parts(SESSION_EVENT_MODELS)
    fact_family, fact_name = _type_parts(LEDGER_FACT_MODELS)
    _, asset_name = _type_parts(ASSET_EVENT_MODELS)
    return (
        StreamChannel(
            "session",
            "tavern.session.{session_id}.{family}.{name}",
            streams.SESSIONS,
            SessionEventMessage,
            "The session logs: gapless, conditional appends; the single source of truth.",
            {
                "session_id": {"description": f"The session: {ID_TEXT}."},
                "family": family,
                "name": name,
            },
            session_headers,
            correlated=True,
        ),
        StreamChannel(
            "input",
            "tavern.input.{session_id}.{kind}",
            streams.INPUTS,
            InputMessage,
            "Messages, cancels and commands for a session's loop; claims are recorded in the "
            "session log.",
            {
                "session_id": {"description": f"The session: {ID_TEXT}."},
                "kind": {"enum": ["message", "cancel", "command"], "description": "What it is."},
            },
            _headers(
                (MSG_ID, PRINCIPAL_HEADER, "Nats-Expected-Stream", *TRACE),
                (MSG_ID, PRINCIPAL_HEADER),
                "Nats-Msg-Id is the input_id, so a retried send is submitted once; the "
                "principal is the sender's.",
            ),
        ),
        StreamChannel(
            "ledger",
            "tavern.ledger.{scope_id}.{family}.{name}",
            streams.LEDGER,
            LedgerFactMessage,
            "Facts the ledger committed; projections follow them.",
            {
                "scope_id": {"description": f"The memory scope: {ID_TEXT}."},
                "family": fact_family,
                "name": fact_name,
            },
            _headers((MSG_ID, "Nats-Expected-Stream"), (MSG_ID,), "Nats-Msg-Id is the fact's id."),
        ),
        StreamChannel(
            "asset",
            "tavern.asset.{kind}.{asset_id}.{name}",
            streams.ASSETS,
            AssetEventMessage,
            "Character cards, lorebooks, personas and presets imported or edited.",
            {
                "kind": {"description": "The asset kind.", "enum": list(get_args(AssetKind))},
                "asset_id": {"description": f"The asset: {ID_TEXT}."},
                "name": asset_name,
            },
            _headers((MSG_ID, "Nats-Expected-Stream"), (), "Nats-Msg-Id is the event id."),
        ),
        StreamChannel(
            "dlq",
            "tavern.dlq.{service}",
            streams.DLQ,
            DeadLetter,
            "Poison messages with the reason and the consumer that gave up.",
            {"service": {"description": "The service whose consumer gave up."}},
            _headers(
                (MSG_ID, "Nats-Expected-Stream"),
                (),
                "Nats-Msg-Id is `dlq-<stream>-<seq>-<consumer>`: one record per message "
                "and consumer; the original message's own headers are kept.",
            ),
        ),
    )


def _stream(spec: StreamSpec) -> dict[str, Any]:
    return {
        "name": spec.name,
        "subjects": list(spec.subjects),
        "retention": "limits",
        "storage": "file",
        "max_age_s": spec.max_age_s,
        "kept": "forever" if not spec.max_age_s else f"{spec.max_age_s / 86400:g} days",
        "duplicate_window_s": spec.duplicate_window_s,
        "deny_delete": spec.deny_delete,
        "allow_direct": spec.allow_direct,
        "allow_atomic_publish": spec.allow_atomic,
    }


# --- the document -------------------------------------------------------------------------------


class _Builder:
    """One document: channels, operations and messages refer to shared component schemas."""

    def __init__(self, title: str, description: str) -> None:
        self.doc: dict[str, Any] = {
            "asyncapi": "3.0.0",
            "info": {
                "title": title,
                "version": version("tavern-events"),
                "description": description,
            },
            "defaultContentType": "application/json",
            "servers": {
                "nats": {
                    "host": "localhost:4222",
                    "protocol": "nats",
                    "description": "NATS with JetStream; every client authenticates.",
                }
            },
            "channels": {},
            "operations": {},
            "components": {"schemas": {}, "messages": {}},
        }
        self.models: list[type[BaseModel]] = []

    def schema(self, model: type[BaseModel]) -> dict[str, Any]:
        self.models.append(model)
        return {"$ref": REF.format(model=_name(model))}

    def message(self, key: str, body: dict[str, Any]) -> dict[str, Any]:
        self.doc["components"]["messages"][key] = body
        return {"$ref": f"#/components/messages/{key}"}

    def stream(self, c: StreamChannel) -> None:
        body: dict[str, Any] = {
            "name": c.key,
            "title": f"{c.stream.name} stream",
            "summary": c.description,
            "payload": self.schema(c.payload),
            "headers": c.headers,
        }
        if c.correlated:
            body["correlationId"] = {
                "description": "The event that caused this one's chain (the turn's input).",
                "location": "$message.payload#/correlation_id",
            }
        self.doc["channels"][c.key] = {
            "address": c.address,
            "title": c.key,
            "description": c.description,
            "parameters": c.parameters,
            "messages": {"event": self.message(_key(c.key, "event"), body)},
            "x-tavern-stream": _stream(c.stream),
        }
        self.doc["operations"][_key(c.key, "publish")] = {
            "action": "send",
            "channel": {"$ref": f"#/channels/{c.key}"},
            "summary": f"Appended to the {c.stream.name} stream.",
            "messages": [{"$ref": f"#/channels/{c.key}/messages/event"}],
        }

    def rpc(self, r: rpc.Rpc) -> None:
        key = _key(r.service, r.operation)
        reply = _key(key, "reply")
        request = self.message(
            _key(key, "request"),
            {
                "name": _key(key, "request"),
                "summary": r.summary,
                "payload": self.schema(r.request),
                "headers": _headers(
                    (PRINCIPAL_HEADER, TIMEOUT_HEADER, *TRACE),
                    () if r.operation == "ping" else (PRINCIPAL_HEADER,),
                    "Who asks, and how long they wait.",
                ),
            },
        )
        result = self.message(
            _key(key, "result"),
            {
                "name": _key(key, "result"),
                "summary": f"The result of {r.subject}.",
                "payload": {"allOf": [self.schema(r.reply)], "not": {"required": ["error"]}},
            },
        )
        error = self.message(
            "rpc_error",
            {
                "name": "rpc_error",
                "summary": "The common error of every RPC (docs/errors.md).",
                "payload": self.schema(ErrorReply),
            },
        )
        self.doc["channels"][key] = {
            "address": r.subject,
            "title": r.subject,
            "description": r.summary,
            "messages": {"request": request},
        }
        self.doc["channels"][reply] = {
            "address": None,
            "description": f"The reply of {r.subject}: the requester's inbox.",
            "messages": {"result": result, "error": error},
        }
        self.doc["operations"][key] = {
            "action": "receive",
            "channel": {"$ref": f"#/channels/{key}"},
            "summary": r.summary,
            "messages": [{"$ref": f"#/channels/{key}/messages/request"}],
            "bindings": {"nats": {"queue": f"{r.service}-rpc", "bindingVersion": NATS_BINDING}},
            "reply": {
                "channel": {"$ref": f"#/channels/{reply}"},
                "messages": [
                    {"$ref": f"#/channels/{reply}/messages/result"},
                    {"$ref": f"#/channels/{reply}/messages/error"},
                ],
            },
        }

    def render(self) -> str:
        schemas: dict[str, Any] = {}
        for model in dict.fromkeys(self.models):
            found = model.model_json_schema(ref_template=REF)
            for name, schema in {**found.pop("$defs", {}), _name(model): found}.items():
                schema = _asyncapi_schema(schema)
                if schemas.setdefault(name, schema) != schema:
                    raise ValueError(f"two different schemas named {name}: rename one")
        self.doc["components"]["schemas"] = schemas
        return json.dumps(self.doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _name(model: type[BaseModel]) -> str:
    """The component key of a model: unique across the contract's modules (letters, digits
    and underscores: what every AsyncAPI tool accepts as a key)."""
    module = model.__module__.removeprefix("tavern_events.").replace(".", "_")
    return f"{'stream' if module == __name__.replace('.', '_') else module}_{model.__name__}"


def _key(*parts: str) -> str:
    """A channel, operation or message key: `ledger.memory.read` -> `ledger_memory_read`."""
    return "_".join(p.replace(".", "_") for p in parts)


def _asyncapi_schema(schema: Any) -> Any:
    """AsyncAPI's schema object names the discriminating property (a string) where pydantic
    writes OpenAPI's `{"propertyName", "mapping"}`."""
    if isinstance(schema, list):
        return [_asyncapi_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    found = {k: _asyncapi_schema(v) for k, v in schema.items()}
    if isinstance(found.get("discriminator"), dict):
        found["discriminator"] = found["discriminator"]["propertyName"]
    return found


def _contract() -> str:
    b = _Builder(
        "AgentTavern contract",
        f"Streams {', '.join(s.name for s in streams.ALL)}, and request/reply under "
        "`tavern.rpc.<service>.>` for the loop, ledger, projector and consolidator. Every "
        "reply is the operation's result or the common error (docs/errors.md); an empty "
        "request body is an empty request; an operation a service does not have is answered "
        "`not_found`.",
    )
    for channel in _stream_channels():
        b.stream(channel)
    for r in rpc.ALL:
        b.rpc(r)
    return b.render()


def _service(name: str) -> str:
    b = _Builder(f"tavern-{name}", f"The request/reply operations of the {name} service.")
    for r in rpc.of_service(name):
        b.rpc(r)
    return b.render()


def documents() -> dict[str, str]:
    """File name -> JSON text of every document, deterministic (sorted keys)."""
    return {"contract.json": _contract(), **{f"{n}.json": _service(n) for n in SERVICES}}


def write(root: Path) -> list[Path]:
    target = root / DOCS_DIR
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in documents().items():
        path = target / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def stale(root: Path) -> list[str]:
    """Documents whose committed text differs from what the code generates now."""
    target = root / DOCS_DIR
    return [
        name
        for name, text in documents().items()
        if not (target / name).exists() or (target / name).read_text(encoding="utf-8") != text
    ]
