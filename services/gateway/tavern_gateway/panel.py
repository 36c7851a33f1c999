"""The management panel's API beyond the memory rights of `web`: memory import into a chat's or
character's scope, rule and style approvals, and the operator's replay with progress. Each call
acts as the signed-in user, and the services check ownership again; the owner's replay, like the
operator view, is asked on the gateway's own account (`service:gateway`), for the owner only."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, File, Form, Response, UploadFile
from pydantic import BaseModel, Field

from tavern_events.reach import memory_scope
from tavern_events.subjects import InvalidIdError, validate_id
from tavern_gateway.accounts import Account
from tavern_gateway.errors import ApiError
from tavern_gateway.web import G, Gateway, Owner, User, check_csrf, own_session
from tavern_runtime import principals
from tavern_runtime.logs import get_logger

log = get_logger(__name__)

panel = APIRouter(prefix="/api", dependencies=[Depends(check_csrf)])

GATEWAY = principals.service("gateway")
"""The gateway on its own account: the owner's operator view asks as it."""
IMPORT_CHUNK_BYTES = 256 * 1024
"""Lines per ledger request stay under this (the ledger's requests are bounded at 1 MiB)."""
MemoryTarget = Literal["chat", "character"]


# --- memory import --------------------------------------------------------------------------


def export_lines(name: str, data: bytes) -> list[str]:
    """The lines of a memory export, or a refusal that says what the file is instead."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(
            "invalid", f"{name} is not a memory export: it is not text", reason="not_jsonl"
        ) from None
    lines = text.splitlines()
    first = next((line for line in lines if line.strip()), None)
    if first is None:
        raise ApiError("invalid", f"{name} is empty: nothing to import", reason="not_jsonl")
    try:
        head = json.loads(first)
    except ValueError:
        head = None
    if not isinstance(head, dict) or "kind" not in head or "data" not in head:
        raise ApiError(
            "invalid",
            f"{name} is not a memory export (JSONL, one exported item per line, as "
            "“Export this chat's memory” writes it)",
            reason="not_jsonl",
        )
    return lines


def chunks(lines: list[str], limit: int = IMPORT_CHUNK_BYTES) -> Iterator[list[str]]:
    """Consecutive lines grouped under `limit` bytes (a longer line goes alone)."""
    group: list[str] = []
    size = 0
    for line in lines:
        cost = len(line.encode()) + 8
        if group and size + cost > limit:
            yield group
            group, size = [], 0
        group.append(line)
        size += cost
    if group:
        yield group


def merged(total: dict[str, Any], reply: dict[str, Any], offset: int) -> None:
    """Add one chunk's report to the file's (line numbers of the whole file)."""
    for kind, n in (reply.get("inserted") or {}).items():
        total["inserted"][kind] = total["inserted"].get(kind, 0) + int(n)
    total["skipped"] += int(reply.get("skipped") or 0)
    for key in ("errors", "refused", "quarantined"):
        total[key] += [{**e, "line": int(e.get("line", 0)) + offset} for e in reply.get(key) or []]


async def memory_scope_of(gw: Gateway, session_id: str, target: MemoryTarget) -> str:
    """The scope a chat's memory lives in (`chat`), or its character's (every chat with it)."""
    binding = await gw.bus.binding_of(session_id)
    if binding is None:
        raise ApiError("not_found", f"no session {session_id}")
    if target == "character" and not binding.character_id:
        raise ApiError("invalid", "this chat has no character: import into the chat instead")
    return memory_scope(
        chat_id=binding.chat_id,
        character_id=binding.character_id,
        agent_id=binding.agent_id,
        reach="character" if target == "character" else binding.memory_reach,
        owner=binding.owner,
    )


@panel.post(
    "/sessions/{session_id}/memory/import",
    summary="Import a memory export (JSONL) into this chat's or its character's memory",
)
async def import_memory(
    session_id: str,
    account: User,
    gw: G,
    file: Annotated[UploadFile, File(description="a JSONL memory export")],
    target: Annotated[MemoryTarget, Form()] = "chat",
) -> dict[str, Any]:
    """Every row passes the ledger's write gate; the report says what was imported, skipped
    as a duplicate, quarantined, or refused and why."""
    session_id = await own_session(gw, account, session_id)
    limit = gw.settings.gateway_max_upload_bytes
    data = await file.read(limit + 1)
    name = Path(file.filename or "upload").name[:255]
    if len(data) > limit:
        raise ApiError("too_large", f"{name} is over the {limit // (1024 * 1024)} MB upload limit")
    lines = export_lines(name, data)
    scope = await memory_scope_of(gw, session_id, target)
    total: dict[str, Any] = {"inserted": {}, "skipped": 0, "errors": [], "refused": []}
    total["quarantined"] = []
    offset = 0
    for group in chunks(lines):
        body = {"scope_id": scope, "jsonl": "\n".join(group), "reason": f"web import of {name}"}
        reply = await gw.bus.rpc(account.principal, "ledger", "import", body)
        merged(total, reply, offset)
        offset += len(group)
    return {"scope_id": scope, "target": target, "file": name, **total}


@panel.get(
    "/sessions/{session_id}/memory/export/character",
    summary="Export the memory of this chat's character (every chat with it) as JSONL",
    response_class=Response,
)
async def export_character(session_id: str, account: User, gw: G) -> Response:
    session_id = await own_session(gw, account, session_id)
    scope = await memory_scope_of(gw, session_id, "character")
    lines: list[str] = []
    cursor: str | None = None
    while True:
        body: dict[str, Any] = {"scope_id": scope, "include_non_active": True, "limit": 500}
        if cursor:
            body["cursor"] = cursor
        reply = await gw.bus.rpc(account.principal, "ledger", "export", body)
        lines += [line for line in reply.get("lines") or [] if isinstance(line, str)]
        cursor = reply.get("cursor")
        if not cursor:
            break
    return Response(
        "\n".join(lines) + ("\n" if lines else ""),
        media_type="application/x-ndjson",
        headers={"Content-Disposition": f'attachment; filename="memory-{scope}.jsonl"'},
    )


# --- rules and style approvals (the consolidator's human gate) --------------------------------


class Decision(BaseModel):
    decision: Literal["approve", "reject"]


def _ask(gw: Gateway, account: Account, operation: str, /, **body: Any) -> Any:
    """A consolidator review operation as the user, signed with their own name."""
    request = {"actor": account.principal.label, **body}
    return gw.bus.rpc(account.principal, "consolidator", operation, request)


@panel.get(
    "/sessions/{session_id}/approvals",
    summary="Rule drafts, style candidates and pool candidates of this chat's memory",
)
async def approvals(
    session_id: str, account: User, gw: G, target: MemoryTarget = "chat"
) -> dict[str, Any]:
    session_id = await own_session(gw, account, session_id)
    scope = await memory_scope_of(gw, session_id, target)
    rules, styles, pool = await asyncio.gather(
        _ask(gw, account, "rules.list", scope_id=scope),
        _ask(gw, account, "expression.list", scope_id=scope, pending=False),
        _ask(gw, account, "dream.review", op="list", scope_id=scope),
    )
    return {
        "scope_id": scope,
        "rule_drafts": rules.get("drafts", []),
        "active_rules": rules.get("active", []),
        "styles": styles.get("candidates", []),
        "pool": pool.get("candidates", []),
    }


@panel.post("/scopes/{scope_id}/rules/{draft_id}", summary="Accept or reject a rule draft")
async def decide_rule(
    scope_id: str, draft_id: str, body: Decision, account: User, gw: G
) -> dict[str, Any]:
    op = "accept" if body.decision == "approve" else "reject"
    scope_id, draft_id = _id(scope_id, "scope id"), _id(draft_id, "draft id")
    reply = await _ask(gw, account, "rules.decide", scope_id=scope_id, op=op, ref=draft_id)
    return {"decided": draft_id, "decision": body.decision, "result": reply}


@panel.post("/styles/{candidate_id}", summary="Approve or reject a style (expression) candidate")
async def decide_style(candidate_id: str, body: Decision, account: User, gw: G) -> dict[str, Any]:
    candidate_id = _id(candidate_id, "candidate id")
    reply = await _ask(
        gw, account, "expression.decide", candidate_id=candidate_id, decision=body.decision
    )
    return {"decided": candidate_id, "decision": body.decision, "result": reply}


@panel.post("/pool/{candidate_id}", summary="Approve or reject a dreaming pool candidate")
async def decide_pool(candidate_id: str, body: Decision, account: User, gw: G) -> dict[str, Any]:
    candidate_id = _id(candidate_id, "candidate id")
    reply = await _ask(gw, account, "dream.review", op=body.decision, ids=[candidate_id])
    if candidate_id not in reply.get("decided", []):
        raise ApiError("not_found", f"no pool candidate {candidate_id} of yours")
    return {"decided": candidate_id, "decision": body.decision, "result": reply}


def _id(value: str, what: str) -> str:
    try:
        return validate_id(value, what=what)
    except InvalidIdError as exc:
        raise ApiError("invalid", str(exc)) from None


# --- the operator's replay (the owner acts as the operator) ---------------------------------


class Replay(BaseModel):
    projection: str = Field(min_length=1, max_length=32, pattern=r"^[a-z]+$")
    session_id: str | None = Field(default=None, max_length=64)
    from_archive: bool = False


@panel.post(
    "/operator/replay",
    summary="Rebuild a projection from the log (owner): starts a job, answers its progress",
)
async def replay(body: Replay, account: Owner, gw: G) -> dict[str, Any]:
    request: dict[str, Any] = {"projection": body.projection, "from_archive": body.from_archive}
    if body.session_id:
        request["session_id"] = _id(body.session_id, "session id")
    log.info("replay_asked", by=account.name, projection=body.projection)
    return await gw.bus.rpc(GATEWAY, "projector", "replay.start", request)


@panel.get("/operator/replay/{job_id}", summary="A replay's progress (owner)")
async def replay_status(job_id: str, account: Owner, gw: G) -> dict[str, Any]:
    job_id = _id(job_id, "job id")
    return await gw.bus.rpc(GATEWAY, "projector", "replay.status", {"job_id": job_id})
