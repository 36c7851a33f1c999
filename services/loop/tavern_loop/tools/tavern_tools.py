"""The agent-tavern read-only tools: card, lore, scene and history (projector) and `acp_query`
(the ledger's evidence), each bounded by limit/maxTokens with hard caps.

The session, character and scope come from the tool context (the binding), never from the
model: no schema has a parameter that names another session, chat or character. Results are
structured JSON with `source` (kind, id, revision), `sourceCount` and `truncated`; the model
is told they are data.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from tavern_events import subjects
from tavern_events.group import GroupBinding
from tavern_loop.domain.speakers import model_pick
from tavern_loop.tools.base import Tool, ToolContext, ToolOutput, ToolSpec
from tavern_loop.tools.ledger_tools import failure

RPC_TIMEOUT_S = 5.0
TOOL_TIMEOUT_S = 6.0
MAX_RESULT_BYTES = 400_000
"""Above the loop's spill threshold on purpose: a large answer (whole card fields, many lore
entries or history hits) spills as a bounded preview with a locator that `spill_read` opens;
this cap only cuts when spill is off or fails."""
CHARS_PER_TOKEN = 4
CHARACTER_FIELDS = (
    "name",
    "nickname",
    "identity_summary",
    "description",
    "personality",
    "scenario",
    "first_mes",
    "mes_example",
    "alternate_greetings",
    "system_prompt",
    "post_history_instructions",
    "tags",
    "creator",
    "character_version",
)
PERSONA_FIELDS = ("name", "description", "title")
EVIDENCE_CHARS = 2000

Body = dict[str, Any]
Shape = Callable[[Mapping[str, Any], Mapping[str, Any]], dict[str, Any]]


def _int(maximum: int, default: int, minimum: int = 1) -> dict[str, Any]:
    return {"type": "integer", "minimum": minimum, "maximum": maximum, "default": default}


def _object(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        schema["required"] = list(required)
    return schema


def _spec(name: str, description: str, parameters: dict[str, Any]) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=description,
        parameters=parameters,
        parallel_safe=True,
        timeout_s=TOOL_TIMEOUT_S,
        max_result_bytes=MAX_RESULT_BYTES,
    )


def _defaults(spec: ToolSpec, args: Any) -> dict[str, Any]:
    properties = spec.parameters.get("properties", {})
    given = args if isinstance(args, dict) else {}
    return {**{k: v["default"] for k, v in properties.items() if "default" in v}, **given}


MakeBody = Callable[[dict[str, Any], ToolContext], Body | str]
"""The RPC request for the model's arguments, or why the call is refused."""


def _adapter(spec: ToolSpec, service: str, operation: str, body: MakeBody, shape: Shape) -> Tool:
    """A tool that asks `service`'s RPC and shapes the reply (errors become failures)."""

    async def run(args: Any, ctx: ToolContext) -> ToolOutput:
        given = _defaults(spec, args)
        made = body(given, ctx)
        if isinstance(made, str):
            return ToolOutput.failure("NOT_BOUND", made)
        request = {**made, "session_id": ctx.session_id}
        reply = await ctx.rpc(subjects.rpc(service, operation), request, RPC_TIMEOUT_S)
        if not isinstance(reply, dict) or "error" in reply:
            return failure(reply if isinstance(reply, dict) else {})
        result = shape(reply, given)
        return ToolOutput(json.dumps(result, ensure_ascii=False), data=result)

    return Tool(spec, run)


# --- tavern_character_get -------------------------------------------------------------------------


def _character_body(args: dict[str, Any], ctx: ToolContext) -> Body | str:
    kind = args["kind"]
    asset = ctx.binding.get("character_id" if kind == "character" else "persona_id")
    if asset is None:
        return f"this session has no {kind} bound"
    fields = args.get("fields") or (
        ["name", "identity_summary", "description", "personality", "scenario"]
        if kind == "character"
        else ["name", "description"]
    )
    return {"kind": kind, "character": asset, "fields": fields, "max_chars": args["maxChars"]}


def _character_shape(reply: Mapping[str, Any], args: Mapping[str, Any]) -> dict[str, Any]:
    source = dict(reply.get("source") or {})
    fields = dict(reply.get("fields") or {})
    return {
        "kind": reply.get("kind"),
        "name": reply.get("name"),
        "fields": fields,
        "source": {
            "kind": source.get("kind"),
            "id": source.get("id"),
            "revision": source.get("hash"),
        },
        "sourceCount": len(fields),
        "truncated": bool(reply.get("truncated")),
    }


def character_get() -> Tool:
    spec = _spec(
        "tavern_character_get",
        "Read fields of this session's character card (or, with kind=persona, the user's "
        "persona): description, personality, scenario, example dialogues, greetings... Each "
        "field is cut to maxChars. Only this session's own character and persona.",
        _object(
            {
                "kind": {"enum": ["character", "persona"], "default": "character"},
                "fields": {
                    "type": "array",
                    "items": {"enum": list(CHARACTER_FIELDS + PERSONA_FIELDS[2:])},
                    "minItems": 1,
                    "maxItems": len(CHARACTER_FIELDS),
                    "uniqueItems": True,
                },
                "maxChars": _int(65_536, 2000),
            }
        ),
    )
    return _adapter(spec, "projector", "character.get", _character_body, _character_shape)


# --- tavern_lore_search ---------------------------------------------------------------------------


def _lore_body(args: dict[str, Any], ctx: ToolContext) -> Body:
    books = [ctx.binding["character_id"]] if ctx.binding.get("character_id") else []
    return {
        "query": args["query"],
        "books": books,
        "limit": args["limit"],
        "max_tokens": args["maxTokens"],
        "truncate": True,
    }


def _lore_shape(reply: Mapping[str, Any], args: Mapping[str, Any]) -> dict[str, Any]:
    entries = [
        {
            "book": e.get("book"),
            "uid": e.get("uid"),
            "comment": e.get("comment"),
            "content": e.get("content"),
            "reason": e.get("reason"),
            "source": {"kind": "world-book", "id": e.get("id"), "revision": reply.get("seed")},
            "truncated": bool(e.get("truncated")),
        }
        for e in reply.get("entries") or []
    ]
    return {
        "entries": entries,
        "usedTokens": reply.get("usedTokens"),
        "sourceCount": reply.get("sourceCount", len(entries)),
        "truncated": bool(reply.get("truncated")),
    }


def lore_search() -> Tool:
    spec = _spec(
        "tavern_lore_search",
        "Search this character's lorebooks (world info) by keywords: the entries the query and "
        "the latest messages activate, within maxTokens. A large answer is stored and shown "
        "as a preview with a locator for spill_read.",
        _object(
            {
                "query": {"type": "string", "minLength": 1, "maxLength": 2000},
                "limit": _int(100, 10),
                "maxTokens": _int(32_000, 1200),
            },
            ("query",),
        ),
    )
    return _adapter(spec, "projector", "lore.search", _lore_body, _lore_shape)


# --- tavern_history_search ------------------------------------------------------------------------


def _history_body(args: dict[str, Any], ctx: ToolContext) -> Body:
    return {
        "query": args["query"],
        "limit": args["limit"],
        "max_tokens": args["maxTokens"],
        "parents": args["parents"],
        "excerpt_chars": args["excerptChars"],
    }


def _history_shape(reply: Mapping[str, Any], args: Mapping[str, Any]) -> dict[str, Any]:
    hits = [
        {
            "chat": h.get("chat"),
            "seq": h.get("seq"),
            "name": h.get("name"),
            "isUser": h.get("isUser"),
            "date": h.get("date"),
            "excerpt": h.get("excerpt"),
            "source": {**(h.get("source") or {}), "revision": h.get("message_id")},
            "truncated": bool(h.get("truncated")),
        }
        for h in reply.get("hits") or []
    ]
    return {
        "hits": hits,
        "sourceCount": reply.get("sourceCount", len(hits)),
        "truncated": bool(reply.get("truncated")),
    }


def history_search() -> Tool:
    spec = _spec(
        "tavern_history_search",
        "Search this chat's full history (and, with parents, the chats it was forked from) for "
        "messages holding every word of the query, newest first. Older turns that are not in "
        "this request are found here. excerptChars shows more of each message (whole ones); a "
        "large answer is stored and shown as a preview with a locator for spill_read.",
        _object(
            {
                "query": {"type": "string", "minLength": 1, "maxLength": 2000},
                "limit": _int(100, 10),
                "maxTokens": _int(32_000, 1200),
                "excerptChars": _int(20_000, 400),
                "parents": {"type": "boolean", "default": True},
            },
            ("query",),
        ),
    )
    return _adapter(spec, "projector", "history.search", _history_body, _history_shape)


# --- tavern_scene_get -----------------------------------------------------------------------------


def _scene_body(args: dict[str, Any], ctx: ToolContext) -> Body:
    return {"max_chars": args["maxChars"]}


def _scene_shape(reply: Mapping[str, Any], args: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("character", "user", "chatId", "architecture", "contextMode", "scenario")
    scene = {k: reply.get(k) for k in keys}
    scene |= {"messageCount": reply.get("messageCount"), "turns": reply.get("turns")}
    revision = reply.get("lastActivity")
    return {
        **scene,
        "source": {**(reply.get("source") or {}), "revision": revision},
        "sourceCount": 1,
        "truncated": bool(reply.get("truncated")),
    }


def scene_get() -> Tool:
    spec = _spec(
        "tavern_scene_get",
        "Read the current scene: character, user, scenario, chat and message counts, the "
        "session's architecture and context mode; in a group chat also its members (muted or "
        "not), who is speaking now and who spoke last.",
        _object({"maxChars": _int(8000, 1200)}),
    )
    projected = _adapter(spec, "projector", "scene.get", _scene_body, _scene_shape)

    async def run(args: Any, ctx: ToolContext) -> ToolOutput:
        out = await projected.handler(args, ctx)
        group = ctx.binding.get("scene_group")
        if not out.ok or out.data is None or not isinstance(group, dict):
            return out
        data = {**out.data, "group": group}
        return ToolOutput(json.dumps(data, ensure_ascii=False), data=data)

    return Tool(spec, run)


# --- tavern_speaker_choose ------------------------------------------------------------------------


def speaker_choose() -> Tool:
    """The model picks the group member who speaks next, where the group lets it
    (`model_chooses`); the decision is the pure `speakers.model_pick`, and its result in the
    log (`next`) is what the loop follows, so a replay of the log follows it too."""
    spec = _spec(
        "tavern_speaker_choose",
        "In a group chat that lets you, choose the member who speaks next (a name or id as "
        "tavern_scene_get lists the members). That member answers right after this reply.",
        _object(
            {
                "name": {"type": "string", "minLength": 1, "maxLength": 128},
                "reason": {"type": "string", "maxLength": 300},
            },
            ("name",),
        ),
    )

    async def run(args: Any, ctx: ToolContext) -> ToolOutput:
        given = args if isinstance(args, dict) else {}
        group, names = ctx.binding.get("group"), ctx.binding.get("member_names")
        speaking = ctx.binding.get("character_id")
        if not isinstance(group, GroupBinding) or not isinstance(names, dict):
            return ToolOutput.failure("NOT_BOUND", "this session is not a group chat")
        choice = model_pick(str(given.get("name") or ""), group, names, speaking)
        if choice.refusal is not None:
            return ToolOutput.failure("REFUSED", choice.refusal)
        chosen = choice.speakers[0]
        data = {"next": {"characterId": chosen, "name": names.get(chosen, chosen)}}
        return ToolOutput(json.dumps(data, ensure_ascii=False), data=data)

    return Tool(spec, run)


# --- acp_query ------------------------------------------------------------------------------------


QUERY_FILTERS = {
    "text": "text",
    "claimDomain": "claim_domain",
    "authority": "authority",
    "sourceClass": "source_class",
}


def _query_body(args: dict[str, Any], ctx: ToolContext) -> Body:
    """Only this session's evidence (active, or in every state with `state: all`) and its
    scope's observations: the session is the context's, never an argument. The ledger audits
    the read as a model's (`model_query`)."""
    body: Body = {
        "state": args["state"],
        "limit": args["limit"],
        "observations": bool(args["includeObservations"]),
        "for_model": True,
    }
    body |= {field: args[name] for name, field in QUERY_FILTERS.items() if args.get(name)}
    return body


def _query_shape(reply: Mapping[str, Any], args: Mapping[str, Any]) -> dict[str, Any]:
    budget = int(args["maxTokens"]) * CHARS_PER_TOKEN
    items, cut = [], False
    rows = [r for r in reply.get("items") or [] if isinstance(r, dict)]
    for row in rows:
        if budget <= 0:
            cut = True
            break
        content = str(row.get("content") or "")[: min(EVIDENCE_CHARS, budget)]
        budget -= len(content)
        items.append(_evidence(row, content))
    truncated = cut or any(i["truncated"] for i in items) or len(rows) >= args["limit"]
    shaped: dict[str, Any] = {"items": items, "sourceCount": len(rows), "truncated": truncated}
    if args.get("includeObservations"):
        found = [o for o in reply.get("observations") or [] if isinstance(o, dict)]
        shaped["observations"] = [_observation(o) for o in found[: args["limit"]]]
    return shaped


def _observation(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "subject": row.get("subject"),
        "predicate": row.get("predicate"),
        "text": str(row.get("text") or "")[:EVIDENCE_CHARS],
        "claimDomain": row.get("claim_domain"),
        "authority": row.get("authority"),
        "observedAt": row.get("observed_at"),
        "source": {"kind": "ledger-observation", "id": row.get("observation_id")},
    }


def _evidence(row: Mapping[str, Any], content: str) -> dict[str, Any]:
    return {
        "content": content,
        "claimDomain": row.get("claim_domain"),
        "authority": row.get("authority"),
        "sourceClass": row.get("source_class"),
        "observedAt": row.get("observed_at"),
        "source": {
            "kind": "ledger-evidence",
            "id": row.get("evidence_id"),
            "revision": row.get("content_hash"),
        },
        "truncated": len(content) < len(str(row.get("content") or "")),
    }


def acp_query() -> Tool:
    spec = _spec(
        "acp_query",
        "Read-only query of this session's evidence in the ledger (what was said and what tools "
        "returned, as the ledger keeps it) and of the observations distilled from it: filter by "
        "text, claim domain, authority or source class. Active evidence unless `state` is "
        "`all`; nothing is changed, and nothing it returns is remembered again.",
        _object(
            {
                "text": {"type": "string", "maxLength": 500},
                "state": {"type": "string", "enum": ["active", "all"], "default": "active"},
                "includeObservations": {"type": "boolean", "default": True},
                "claimDomain": {"type": "string", "maxLength": 32},
                "authority": {"type": "string", "maxLength": 32},
                "sourceClass": {"type": "string", "maxLength": 32},
                "limit": _int(20, 10),
                "maxTokens": _int(4000, 1200),
            }
        ),
    )
    return _adapter(spec, "ledger", "query", _query_body, _query_shape)


def tavern_tools() -> list[Tool]:
    """The read-only agent-tavern tools, in the order the model sees them."""
    return [
        character_get(),
        lore_search(),
        scene_get(),
        speaker_choose(),
        history_search(),
        acp_query(),
    ]
