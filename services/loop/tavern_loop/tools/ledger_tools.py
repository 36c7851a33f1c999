"""The memory and variable tools: thin adapters over the ledger's store RPCs.

The session comes from the tool context, never from the model: the ledger resolves every scope
from that session's binding. Arguments are camelCase for the model and snake_case on the bus;
results are structured JSON (revision, source, truncated, sourceCount). An RPC error becomes
`ToolOutput.failure(code, message)`; an empty search is an empty list, not an error.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tavern_events import subjects
from tavern_events.replies import ErrorBody, error_of
from tavern_loop.tools.base import Tool, ToolContext, ToolOutput, ToolSpec

RPC_TIMEOUT_S = 5.0
TOOL_TIMEOUT_S = 6.0
MAX_RESULT_BYTES = 64_000

MEMORY_SCOPES = ["chat", "character", "agent", "global"]
VARIABLE_SCOPES = ["turn", "chat", "character", "agent", "global"]
DOMAINS = ["experience", "user_fact", "work", "external_fact"]
NAME = {"type": "string", "pattern": r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$"}
ANY_JSON = {
    "type": ["string", "number", "integer", "boolean", "array", "object", "null"],
    "description": "Any JSON value (at most 32 KiB encoded).",
}
SCORE = {"type": "number", "minimum": 0, "maximum": 1}
REVISION = {"type": "integer", "minimum": 0}
TAGS = {"type": "array", "items": {"type": "string", "maxLength": 100}, "maxItems": 32}

ArgMap = Mapping[str, str]
"""Model argument name -> RPC field name: the only arguments forwarded."""


def _object(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        schema["required"] = required
    return schema


# --- argument and result shapes ---------------------------------------------------------------


def _snake_key(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


_RENAMED = {"ttlSeconds": "ttl_s", "domain": "claim_domain", "sourceRef": "source_ref"}


def forwarded(args: Mapping[str, Any], allowed: frozenset[str]) -> dict[str, Any]:
    """The model's arguments the RPC takes, renamed; anything else is dropped."""
    out: dict[str, Any] = {}
    for name, value in args.items():
        if name not in allowed:
            continue
        out[_RENAMED.get(name, _snake_key(name))] = _changes(value) if name == "changes" else value
    return out


def _changes(value: Any) -> Any:
    if not isinstance(value, list):
        return value
    return [
        {_snake_key(k): v for k, v in item.items()} if isinstance(item, dict) else item
        for item in value
    ]


_OPAQUE = frozenset({"value", "source"})
"""Keys whose values are data (a variable's value, a memory's source): never renamed inside."""


def camel(value: Any) -> Any:
    """snake_case keys of an RPC reply as camelCase for the model, leaving data alone."""
    if isinstance(value, list):
        return [camel(v) for v in value]
    if not isinstance(value, dict):
        return value
    return {_camel_key(k): (v if k in _OPAQUE else camel(v)) for k, v in value.items()}


def _camel_key(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part.capitalize() for part in rest)


def failure(reply: Mapping[str, Any]) -> ToolOutput:
    """An RPC error reply (`tavern_events.replies`) as a tool failure: its code, and in the
    message the details the model can act on (the finer reason, the current revision, ...)."""
    error = error_of(reply) or ErrorBody(code="internal", message="no reply", retryable=True)
    details = error.model_extra or {}
    message = error.message or "the service refused the request"
    if error.reason:
        message += f" ({error.reason})"
    if "current_revision" in details:
        message += f" (current revision: {details['current_revision']})"
    if details.get("reasons"):
        message += f" (reasons: {', '.join(map(str, details['reasons']))})"
    if "retry_after_ms" in details:
        message += f" (retry after {details['retry_after_ms']} ms)"
    if error.retryable:
        message += " (retryable)"
    return ToolOutput.failure(error.code, message)


# --- the adapter ------------------------------------------------------------------------------


@dataclass(frozen=True)
class LedgerTool:
    """One tool: its spec, the RPC it calls, and which arguments it forwards."""

    spec: ToolSpec
    operation: str
    arguments: frozenset[str]

    async def __call__(self, args: Any, ctx: ToolContext) -> ToolOutput:
        given = {**self.defaults(), **(args or {})}
        request = {**forwarded(given, self.arguments), **_caller(ctx)}
        reply = await ctx.rpc(subjects.rpc("ledger", self.operation), request, RPC_TIMEOUT_S)
        if not isinstance(reply, dict) or "error" in reply:
            return failure(reply if isinstance(reply, dict) else {})
        result = camel(reply)
        return ToolOutput(json.dumps(result, ensure_ascii=False), data=result)

    def defaults(self) -> dict[str, Any]:
        """The schema's top-level defaults (JSON schema validation does not fill them in)."""
        properties = self.spec.parameters.get("properties", {})
        return {k: v["default"] for k, v in properties.items() if "default" in v}

    def tool(self) -> Tool:
        return Tool(self.spec, self)


def _caller(ctx: ToolContext) -> dict[str, Any]:
    """Who is asking, from the runner's context: this is what the ledger scopes by."""
    caller = {
        "session_id": ctx.session_id,
        "turn": ctx.turn,
        "step": ctx.step,
        "call_id": ctx.call_id,
        "agent_id": ctx.agent_id,
    }
    member = ctx.binding.get("member")
    if isinstance(member, str):  # a group member's own memory (reach `member`)
        caller["member"] = member
    return caller


def _spec(
    name: str, description: str, parameters: dict[str, Any], *, reads: bool = False
) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=description,
        parameters=parameters,
        parallel_safe=reads,
        timeout_s=TOOL_TIMEOUT_S,
        max_result_bytes=MAX_RESULT_BYTES,
    )


def _adapter(
    name: str,
    operation: str,
    description: str,
    parameters: dict[str, Any],
    *,
    reads: bool = False,
) -> LedgerTool:
    spec = _spec(name, description, parameters, reads=reads)
    return LedgerTool(spec, operation, frozenset(parameters["properties"]))


# --- the tools --------------------------------------------------------------------------------


def _memory_tools() -> list[LedgerTool]:
    return [
        _adapter(
            "memory_search",
            "memory.search",
            "Search long-term memory by keywords, tags, scope and time range. Returns the best "
            "hits with id, revision, source and score; `truncated` says whether more matched "
            "or a hit was cut to fit maxTokens. No scope searches every scope of this session.",
            _object(
                {
                    "query": {"type": "string", "maxLength": 2000},
                    "tags": {**TAGS, "maxItems": 16},
                    "scope": {"enum": MEMORY_SCOPES},
                    "since": {"type": "string", "format": "date-time"},
                    "until": {"type": "string", "format": "date-time"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 20, "default": 10},
                    "maxTokens": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": 2000,
                        "default": 1200,
                    },
                }
            ),
            reads=True,
        ),
        _adapter(
            "memory_read",
            "memory.read",
            "Read one memory by id, with its source, revision and state.",
            _object({"id": {"type": "string", "minLength": 1, "maxLength": 64}}, ["id"]),
            reads=True,
        ),
        _adapter(
            "memory_write",
            "memory.write",
            "Remember something for later turns. Secrets are refused; text that reads like "
            "instructions is kept quarantined (not searchable). Returns id and revision.",
            _object(
                {
                    "scope": {"enum": MEMORY_SCOPES, "default": "chat"},
                    "content": {"type": "string", "minLength": 1, "maxLength": 8000},
                    "kind": {"enum": ["semantic", "episodic"], "default": "semantic"},
                    "tags": TAGS,
                    "importance": SCORE,
                    "confidence": SCORE,
                    "ttlSeconds": {"type": "integer", "minimum": 1},
                    "domain": {"enum": DOMAINS, "default": "experience"},
                    "sourceRef": {"type": "string", "maxLength": 200},
                },
                ["content"],
            ),
        ),
        _adapter(
            "memory_update",
            "memory.update",
            "Change a memory you read: pass its id and the revision you saw (a stale revision "
            "is refused with the current one). Omitted fields keep their values; "
            "ttlSeconds 0 removes the expiry.",
            _object(
                {
                    "id": {"type": "string", "minLength": 1, "maxLength": 64},
                    "expectedRevision": {"type": "integer", "minimum": 1},
                    "content": {"type": "string", "minLength": 1, "maxLength": 8000},
                    "tags": TAGS,
                    "importance": SCORE,
                    "confidence": SCORE,
                    "ttlSeconds": {"type": "integer", "minimum": 0},
                    "domain": {"enum": DOMAINS},
                    "sourceRef": {"type": "string", "maxLength": 200},
                },
                ["id", "expectedRevision"],
            ),
        ),
        _adapter(
            "memory_forget",
            "memory.forget",
            "Forget a memory (soft: it is hidden from search and read, the audit keeps it).",
            _object(
                {
                    "id": {"type": "string", "minLength": 1, "maxLength": 64},
                    "expectedRevision": {"type": "integer", "minimum": 1},
                    "reason": {"type": "string", "maxLength": 200},
                },
                ["id"],
            ),
        ),
    ]


def _variable_tools() -> list[LedgerTool]:
    scope = {"enum": VARIABLE_SCOPES}
    return [
        _adapter(
            "variable_get",
            "variable.get",
            "Read one variable: its value, JSON type and revision (and the scope's revision).",
            _object({"scope": scope, "name": NAME}, ["scope", "name"]),
            reads=True,
        ),
        _adapter(
            "variable_set",
            "variable.set",
            "Set a variable if its revision is still expectedRevision (0 or omitted: it must "
            "not exist yet). A stale revision is refused with the current one. `turn` scope "
            "ends with the turn; chat, character and agent persist.",
            _object(
                {"scope": scope, "name": NAME, "value": ANY_JSON, "expectedRevision": REVISION},
                ["scope", "name", "value"],
            ),
        ),
        _adapter(
            "variable_patch",
            "variable.patch",
            "Change several variables of one scope atomically, if the scope is still at "
            "expectedRevision (from variable_get or variable_list). Each change sets a value or "
            "deletes; all apply or none.",
            _object(
                {
                    "scope": scope,
                    "expectedRevision": REVISION,
                    "changes": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": 32,
                        "items": _object(
                            {
                                "name": NAME,
                                "value": ANY_JSON,
                                "delete": {"type": "boolean"},
                                "expectedRevision": REVISION,
                            },
                            ["name"],
                        ),
                    },
                },
                ["scope", "expectedRevision", "changes"],
            ),
        ),
        _adapter(
            "variable_delete",
            "variable.delete",
            "Delete a variable (audited); with expectedRevision only if it is unchanged.",
            _object(
                {"scope": scope, "name": NAME, "expectedRevision": REVISION}, ["scope", "name"]
            ),
        ),
        _adapter(
            "variable_list",
            "variable.list",
            "List variable names of a scope by prefix, with types, revisions and short value "
            "summaries (use variable_get for a full value).",
            _object(
                {
                    "scope": scope,
                    "prefix": {"type": "string", "maxLength": 64},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 50},
                },
                ["scope"],
            ),
            reads=True,
        ),
    ]


def ledger_tools() -> list[Tool]:
    """Every memory and variable tool; the caller decides which registry gets them."""
    return [adapter.tool() for adapter in _memory_tools() + _variable_tools()]
