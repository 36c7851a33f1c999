"""The HTTP API and the pages. Every request that reaches the bus carries the signed-in user's
principal; the services check it (the gateway's own checks only spare them the round trip)."""

from __future__ import annotations

import asyncio
import hmac
import json
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi import APIRouter, Depends, File, Form, Header, Request, UploadFile
from fastapi.responses import (
    FileResponse,
    HTMLResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from fastapi.templating import Jinja2Templates
from pydantic import BaseModel, Field

from tavern_events.ids import new_id
from tavern_events.subjects import InvalidIdError, validate_id
from tavern_gateway import accounts, navigation
from tavern_gateway.accounts import Account
from tavern_gateway.bus import Bus, Refused
from tavern_gateway.config import GatewaySettings
from tavern_gateway.errors import ApiError
from tavern_gateway.headers import PAGE_CSP
from tavern_gateway.projected import until_projected
from tavern_gateway.store import Store
from tavern_runtime import principals, rpcguard
from tavern_runtime.cards import cards, importer
from tavern_runtime.cards.errors import CardError
from tavern_runtime.logs import get_logger

log = get_logger(__name__)

SESSION_COOKIE = "tavern_session"
CSRF_COOKIE = "tavern_csrf"
CSRF_HEADER = "X-CSRF-Token"
UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})
TEMPLATES = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))
OWNER_WAIT_S = 10.0


@dataclass
class Gateway:
    settings: GatewaySettings
    store: Store
    bus: Bus

    @property
    def secure_cookies(self) -> bool:
        """Secure cookies unless browsers reach the app over plain http on loopback."""
        url = self.settings.gateway_public_url
        if url:
            return url.startswith("https://")
        return self.settings.gateway_host not in ("127.0.0.1", "localhost", "::1")


def gateway(request: Request) -> Gateway:
    found: Gateway = request.app.state.gateway
    return found


G = Annotated[Gateway, Depends(gateway)]


async def signed_in(request: Request, gw: G) -> Account | None:
    token = request.cookies.get(SESSION_COOKIE)
    return await gw.store.session_account(token) if token else None


async def user(request: Request, gw: G) -> Account:
    account = await signed_in(request, gw)
    if account is None:
        expired = SESSION_COOKIE in request.cookies
        raise ApiError(
            "unauthenticated",
            "your session has expired; sign in again"
            if expired
            else "sign in first (no session cookie)",
        )
    return account


User = Annotated[Account, Depends(user)]


async def owner(account: User) -> Account:
    if not account.is_owner:
        raise ApiError("forbidden", "only the owner of this install may do that")
    return account


Owner = Annotated[Account, Depends(owner)]


def check_csrf(request: Request) -> None:
    """Double submit: a state-changing request carries the CSRF cookie's value in a header (a
    page of another site can read neither the cookie nor send the header without CORS)."""
    if request.method not in UNSAFE:
        return
    cookie = request.cookies.get(CSRF_COOKIE, "")
    sent = request.headers.get(CSRF_HEADER, "")
    if not cookie or not sent or not _same(cookie, sent):
        raise ApiError(
            "forbidden",
            f"missing or wrong {CSRF_HEADER}: reload the page and try again",
            reason="csrf",
        )


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


def sid(session_id: str) -> str:
    try:
        return validate_id(session_id, what="session id")
    except InvalidIdError as exc:
        raise ApiError("invalid", str(exc)) from None


async def own_session(gw: Gateway, account: Account, session_id: str) -> str:
    """The session id, if the account may act on it (owner per its `session/created`)."""
    session_id = sid(session_id)
    found = await gw.bus.owner_of(session_id)
    if found is None:
        raise ApiError("not_found", f"no session {session_id}")
    principals.authorize(account.principal, found, f"session {session_id}")
    return session_id


def set_session_cookie(gw: Gateway, response: Response, token: str) -> None:
    response.set_cookie(
        SESSION_COOKIE,
        token,
        max_age=gw.settings.gateway_session_ttl_s,
        httponly=True,
        secure=gw.secure_cookies,
        samesite="strict",
        path="/",
    )


# --- bodies ---------------------------------------------------------------------------------


class Credentials(BaseModel):
    name: str = Field(min_length=1, max_length=64)
    password: str = Field(min_length=1, max_length=accounts.MAX_PASSWORD)


class NewSession(BaseModel):
    architecture: Literal["agent-tavern", "st"] = "agent-tavern"
    context_mode: Literal["dsh-native", "agent-managed"] = "dsh-native"
    character_id: str | None = Field(default=None, max_length=64)
    persona_id: str | None = Field(default=None, max_length=64)
    memory_reach: Literal["chat", "character", "agent"] | None = None
    members: list[str] = Field(default_factory=list, max_length=64)
    """A group chat: its members' character ids (two or more; the first opens the chat)."""
    group_name: str = Field(default="", max_length=200)
    activation: Literal["natural", "list", "pooled", "manual"] = "natural"


class Message(BaseModel):
    text: str = Field(min_length=1, max_length=32_000)


class Command(BaseModel):
    name: Literal["compact", "swipe", "regenerate", "mode", "fork", "speak"]
    args: dict[str, str | int | bool] = Field(default_factory=dict)


class Correction(BaseModel):
    text: str = Field(min_length=1, max_length=8000)
    session_id: str | None = Field(default=None, max_length=64)
    reason: str = Field(default="", max_length=500)


class Transition(BaseModel):
    reason: str = Field(default="", max_length=500)


VariableScope = Literal["chat", "character", "agent"]


class VariableEdit(BaseModel):
    scope: VariableScope = "chat"
    name: str = Field(min_length=1, max_length=256)
    value: Any = None
    expected_revision: int = Field(default=0, ge=0)


class Cleanup(BaseModel):
    session_id: str = Field(max_length=64)
    confirm: list[str] = Field(default_factory=list, max_length=2000)


# --- accounts -------------------------------------------------------------------------------

api = APIRouter(prefix="/api", dependencies=[Depends(check_csrf)])


@api.post("/setup", summary="Create the owner account (first visit of a fresh install)")
async def setup(body: Credentials, gw: G) -> Response:
    if await gw.store.has_owner():
        raise ApiError("conflict", "this install already has its owner; sign in instead")
    name = accounts.check_name(body.name)
    pw_hash = accounts.hash_password(body.password)
    account = await gw.store.create_account(
        name, accounts.principal_name_for(name, "owner"), "owner", pw_hash
    )
    return await _signed_in_response(gw, account)


@api.post("/login", summary="Sign in; rate-limited per account and client address")
async def login(body: Credentials, request: Request, gw: G) -> Response:
    limit, window = gw.settings.gateway_login_failures, gw.settings.gateway_login_window_s
    client = accounts.client_key(request.client.host if request.client else "")
    wait_s = await gw.store.take_attempt(body.name, client, limit, window)
    if wait_s:
        error = ApiError(
            "rate_limited",
            f"too many failed sign-ins for {body.name!r} from this address; "
            f"wait {max(1, wait_s // 60)} minute(s)",
        )
        error.headers = {"Retry-After": str(wait_s)}  # type: ignore[attr-defined]
        raise error
    found = await gw.store.account_with_hash(body.name)
    stored = found[1] if found else accounts.DUMMY_HASH
    ok = await asyncio.to_thread(accounts.verify_password, stored, body.password)
    if found is None or not ok:  # the attempt taken above stays counted
        raise ApiError("unauthenticated", "wrong name or password")
    await gw.store.forget_attempts(body.name, client)
    return await _signed_in_response(gw, found[0])


async def _signed_in_response(gw: Gateway, account: Account) -> Response:
    token = await gw.store.open_session(account.name, gw.settings.gateway_session_ttl_s)
    response = Response(
        json.dumps({"name": account.name, "role": account.role}), media_type="application/json"
    )
    set_session_cookie(gw, response, token)
    return response


@api.post("/logout", summary="Sign out of this browser")
async def logout(request: Request, gw: G) -> Response:
    token = request.cookies.get(SESSION_COOKIE)
    if token:
        await gw.store.close_session(token)
    response = Response(status_code=204)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


@api.post("/logout-everywhere", summary="End every web session of the signed-in account")
async def logout_everywhere(account: User, gw: G) -> Response:
    ended = await gw.store.close_all_sessions(account.name)
    response = Response(json.dumps({"ended": ended}), media_type="application/json")
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


@api.get("/me", summary="The signed-in account")
async def me(account: User) -> dict[str, Any]:
    return {"name": account.name, "role": account.role, "principal": account.principal.label}


@api.post("/invites", summary="Invite a user (owner only): a one-time link")
async def invite(request: Request, account: Owner, gw: G) -> dict[str, Any]:
    token = await gw.store.create_invite(account.name, gw.settings.gateway_invite_ttl_s)
    base = gw.settings.gateway_public_url.rstrip("/") or str(request.base_url).rstrip("/")
    return {"url": f"{base}/invite/{token}", "expires_in_s": gw.settings.gateway_invite_ttl_s}


@api.post("/invites/{token}/accept", summary="Create an invited account and sign in")
async def accept_invite(token: str, body: Credentials, gw: G) -> Response:
    name = accounts.check_name(body.name)
    pw_hash = await asyncio.to_thread(accounts.hash_password, body.password)
    principal = accounts.invitee_principal(secrets.token_hex(12))
    account = await gw.store.accept_invite(token, name, principal, pw_hash)
    if account is None:
        raise ApiError("not_found", "this invite link is used up or has expired; ask for a new one")
    return await _signed_in_response(gw, account)


# --- characters and assets ------------------------------------------------------------------


@api.get("/characters", summary="The signed-in user's characters (the gallery)")
async def characters(account: User, gw: G) -> dict[str, Any]:
    found = await gw.store.imports(account.principal_name, "character")
    for item in found:
        item["avatar"] = f"/api/assets/{item['asset_id']}/avatar" if item.pop("image") else None
    return {"characters": found}


@api.get("/assets", summary="Everything the signed-in user imported")
async def assets(account: User, gw: G) -> dict[str, Any]:
    found = await gw.store.imports(account.principal_name)
    for item in found:
        item.pop("image", None)
    return {"assets": found}


@api.get("/assets/{asset_id}/avatar", summary="A character's image", response_model=None)
async def avatar(asset_id: str, account: User, gw: G) -> Response:
    item = await gw.store.imported(account.principal_name, asset_id)
    if item is None or not item["image"]:
        raise ApiError("not_found", f"no image for {asset_id}")
    path = (gw.settings.data_dir / item["image"]).resolve()
    if not path.is_file() or gw.settings.data_dir.resolve() not in path.parents:
        raise ApiError("not_found", f"the image of {asset_id} is not on this host")
    return FileResponse(path, media_type="image/png", headers={"Cache-Control": "private"})


@api.post("/assets", summary="Import a card (PNG or JSON, V1/V2/V3), lorebook or persona")
async def import_asset(
    account: User,
    gw: G,
    file: Annotated[UploadFile, File(description="the card, lorebook or persona file")],
    kind: Annotated[Literal["character", "lorebook", "persona"] | None, Form()] = None,
) -> dict[str, Any]:
    limit = gw.settings.gateway_max_upload_bytes
    data = await file.read(limit + 1)
    if len(data) > limit:
        raise ApiError(
            "too_large", f"{file.filename} is over the {limit // (1024 * 1024)} MB upload limit"
        )
    name = Path(file.filename or "upload").name[:255]
    try:
        found = cards.decode_file(data, kind, Path(name).stem)
    except CardError as exc:
        problem = f"{name} is not a card we can import: {exc.message}"
        raise ApiError("invalid", problem, reason="invalid_card") from None
    asset = cards.owned_by(found, account.principal_name)  # the signed-in user's, by id too
    _storable(asset, name)
    locator = (
        await asyncio.to_thread(importer.store_image, data, gw.settings.data_dir)
        if asset.kind == "character"
        else None
    )
    event = importer.event_for(asset, name, locator, datetime.now(UTC))
    seq, duplicate = await importer.publish(gw.bus.js, event)
    greeting = (
        _greeting(asset.content, asset.name, account.name) if asset.kind == "character" else ""
    )
    await gw.store.record_import(
        account.principal_name, asset.asset_id, asset.kind, asset.name, locator, greeting
    )
    ready = await until_projected(
        gw.bus, account.principal, asset.kind, asset.asset_id, asset.content_hash
    )
    return {
        "asset_id": asset.asset_id,
        "kind": asset.kind,
        "name": asset.name,
        "source_format": asset.source_format,
        "duplicate": duplicate,
        "stream_seq": seq,
        "ready": ready,
    }


def _storable(asset: cards.ImportedAsset, file_name: str) -> None:
    """Refuse, before anything is stored or published, a card that no store can hold (NUL, a
    lone surrogate): the import event would reach the projector only to be dead-lettered."""
    problem = rpcguard.hostile({"file": file_name, "name": asset.name, "card": asset.content})
    if problem:
        message = f"{file_name or 'the file'} is not a card we can import: {problem}"
        raise ApiError("invalid", message, reason="invalid_card")


def _greeting(content: dict[str, Any], name: str, user_name: str) -> str:
    data = content.get("data") if isinstance(content.get("data"), dict) else content
    text = str((data or {}).get("first_mes") or "")
    return text.replace("{{char}}", name).replace("{{user}}", user_name)[:8000]


# --- sessions -------------------------------------------------------------------------------


@api.get("/sessions", summary="The signed-in user's sessions (chats)")
async def sessions(account: User, gw: G) -> dict[str, Any]:
    return await gw.bus.rpc(account.principal, "projector", "sessions.list", {"limit": 200})


@api.post("/sessions", summary="Start a chat: a session with its architecture and context mode")
async def new_session(body: NewSession, account: User, gw: G) -> dict[str, Any]:
    session_id = f"s-{new_id()[-12:].lower()}"
    args: dict[str, Any] = {"architecture": body.architecture}
    if body.architecture == "agent-tavern":
        args["context_mode"] = body.context_mode
    for key in ("character_id", "persona_id", "memory_reach"):
        value = getattr(body, key)
        if value:
            args[key] = value
    for character in filter(None, [body.character_id, *body.members]):
        if not await gw.store.imported(account.principal_name, character):
            raise ApiError("not_found", f"no character {character} of yours")
    if body.members:
        args["group"] = group_args(session_id, body)
        args.pop("character_id", None)  # the group's first member opens the chat
    await gw.bus.send_command(account.principal, session_id, "create", args)
    return {"session_id": session_id, "url": f"/chat/{session_id}"}


def group_args(session_id: str, body: NewSession) -> dict[str, Any]:
    """The `create` command's group binding for the members chosen in the web app."""
    if len(set(body.members)) != len(body.members) or len(body.members) < 2:
        raise ApiError("invalid", "a group chat has two or more different members")
    return {
        "group_id": f"g-{session_id.removeprefix('s-')}",
        "name": body.group_name,
        "members": [{"character_id": m} for m in body.members],
        "activation": body.activation,
    }


@api.post("/sessions/{session_id}/messages", summary="Say something in a chat")
async def send(session_id: str, body: Message, account: User, gw: G) -> dict[str, Any]:
    session_id = await own_session(gw, account, session_id)
    return {"input_id": await gw.bus.send_message(account.principal, session_id, body.text)}


@api.post(
    "/sessions/{session_id}/commands", summary="/compact, /swipe, /regenerate, /mode, /fork, /speak"
)
async def command(session_id: str, body: Command, account: User, gw: G) -> dict[str, Any]:
    session_id = await own_session(gw, account, session_id)
    args = dict(body.args)
    forked: str | None = None
    if body.name == "fork":
        forked = f"s-{new_id()[-12:].lower()}"
        args["session_id"] = forked
    input_id = await gw.bus.send_command(account.principal, session_id, body.name, args)
    return {"input_id": input_id, "fork": forked}


@api.post("/sessions/{session_id}/cancel", summary="Cancel the running turn")
async def cancel(session_id: str, account: User, gw: G) -> dict[str, Any]:
    session_id = await own_session(gw, account, session_id)
    return {"input_id": await gw.bus.cancel(account.principal, session_id)}


@api.get(
    "/sessions/{session_id}/events",
    summary="The session's log as server-sent events; resumes after Last-Event-ID",
    response_class=StreamingResponse,
)
async def events(
    session_id: str,
    request: Request,
    account: User,
    gw: G,
    last_event_id: Annotated[str | None, Header()] = None,
    after: int = 0,
) -> StreamingResponse:
    session_id = sid(session_id)
    deadline = asyncio.get_running_loop().time() + OWNER_WAIT_S
    while (found := await gw.bus.owner_of(session_id)) is None:  # a new chat's creation
        if asyncio.get_running_loop().time() > deadline:
            raise ApiError("not_found", f"no session {session_id}")
        await asyncio.sleep(0.2)
    principals.authorize(account.principal, found, f"session {session_id}")
    start = after
    if last_event_id and last_event_id.isdigit():
        start = int(last_event_id)
    return StreamingResponse(
        _sse(gw, session_id, start, request),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


async def _sse(gw: Gateway, session_id: str, start: int, request: Request) -> AsyncIterator[bytes]:
    yield b"retry: 1000\n\n"
    async for stored in gw.bus.follow(session_id, start):
        if stored is None:
            if await request.is_disconnected():
                return
            yield b": keep-alive\n\n"
            continue
        yield b"id: %d\ndata: %s\n\n" % (stored.seq, stored.data)


# --- memory (the ledger's user rights) ------------------------------------------------------


@api.get("/memory", summary="Memory items of a chat (session) or scope")
async def memory(
    account: User,
    gw: G,
    session_id: str | None = None,
    scope_id: str | None = None,
    state: Literal["active", "quarantined", "superseded", "redacted", "all"] = "active",
    text: str | None = None,
    limit: int = 100,
) -> dict[str, Any]:
    body: dict[str, Any] = {"state": state, "limit": max(1, min(limit, 500))}
    if session_id:
        body["session_id"] = sid(session_id)
    if scope_id:
        body["scope_id"] = scope_id
    if text:
        body["text"] = text
    if not session_id and not scope_id:
        raise ApiError("invalid", "name a session_id or a scope_id")
    return await gw.bus.rpc(account.principal, "ledger", "query", body)


@api.get("/memory/{evidence_id}", summary="One memory item")
async def inspect(evidence_id: str, account: User, gw: G) -> dict[str, Any]:
    return await gw.bus.rpc(account.principal, "ledger", "inspect", {"evidence_id": evidence_id})


@api.get("/memory/{evidence_id}/history", summary="Its lineage")
async def history(evidence_id: str, account: User, gw: G) -> dict[str, Any]:
    return await gw.bus.rpc(account.principal, "ledger", "history", {"evidence_id": evidence_id})


@api.post("/memory/{evidence_id}/correct", summary="Correct an item: the new text supersedes it")
async def correct(evidence_id: str, body: Correction, account: User, gw: G) -> dict[str, Any]:
    request: dict[str, Any] = {"evidence_id": evidence_id, "text": body.text, "reason": body.reason}
    if body.session_id:
        request["session_id"] = sid(body.session_id)
    return await gw.bus.rpc(account.principal, "ledger", "correct", request)


@api.post("/memory/{evidence_id}/{action}", summary="release, quarantine, redact, delete, rollback")
async def transition(
    evidence_id: str,
    action: Literal["release", "quarantine", "redact", "delete", "rollback"],
    body: Transition,
    account: User,
    gw: G,
) -> dict[str, Any]:
    request = {"evidence_id": evidence_id, "reason": body.reason or f"{action} from the web app"}
    return await gw.bus.rpc(account.principal, "ledger", action, request)


@api.get("/sessions/{session_id}/memory/export", summary="Export a chat's memory as JSONL")
async def export(session_id: str, account: User, gw: G) -> Response:
    """The ledger's export of the scopes this chat's memory lives in, kept to this chat's own
    items (a character's scope also holds its other chats)."""
    session_id = await own_session(gw, account, session_id)
    listed = await gw.bus.rpc(
        account.principal,
        "ledger",
        "query",
        {"session_id": session_id, "state": "all", "limit": 500},
    )
    items = listed.get("items", [])
    ids = {str(item.get("evidence_id")) for item in items}
    scopes = sorted({str(item.get("scope_id")) for item in items if item.get("scope_id")})
    lines: list[str] = []
    for scope in scopes:
        cursor: str | None = None
        while True:
            body: dict[str, Any] = {"scope_id": scope, "include_non_active": True, "limit": 500}
            if cursor:
                body["cursor"] = cursor
            reply = await gw.bus.rpc(account.principal, "ledger", "export", body)
            for line in reply.get("lines") or []:
                if isinstance(line, str) and _of_chat(line, session_id, ids):
                    lines.append(line)
            cursor = reply.get("cursor")
            if not cursor:
                break
    return Response(
        "\n".join(lines) + ("\n" if lines else ""),
        media_type="application/x-ndjson",
        headers={"Content-Disposition": f'attachment; filename="memory-{session_id}.jsonl"'},
    )


def _of_chat(line: str, session_id: str, ids: set[str]) -> bool:
    try:
        record = json.loads(line)
    except ValueError:
        return False
    flat = json.dumps(record)
    return session_id in flat or any(i in flat for i in ids)


@api.post("/sessions/{session_id}/memory/cleanup", summary="Delete a chat's memory (confirmed)")
async def cleanup(session_id: str, body: Cleanup, account: User, gw: G) -> dict[str, Any]:
    session_id = await own_session(gw, account, session_id)
    return await _cleanup(gw, account, {"session_id": session_id}, body.confirm, "chat")


class ScopeCleanup(BaseModel):
    confirm: list[str] = Field(default_factory=list, max_length=2000)


@api.post(
    "/scopes/{scope_id}/memory/cleanup",
    summary="Delete a scope's memory (a character's: every chat with it), confirmed",
)
async def cleanup_scope(scope_id: str, body: ScopeCleanup, account: User, gw: G) -> dict[str, Any]:
    return await _cleanup(gw, account, {"scope_id": scope_id}, body.confirm, "scope")


async def _cleanup(
    gw: Gateway, account: Account, where: dict[str, Any], confirm: list[str], what: str
) -> dict[str, Any]:
    """Without a confirmation naming exactly the items that would go: those items, nothing
    deleted. With it: each deleted (the ledger checks every one)."""
    listed = await gw.bus.rpc(account.principal, "ledger", "query", {**where, "limit": 500})
    items = listed.get("items", [])
    ids = [str(item.get("evidence_id")) for item in items]
    if sorted(ids) != sorted(confirm):
        preview = [
            {"evidence_id": str(i.get("evidence_id")), "text": i.get("content")} for i in items
        ]
        return {"deleted": [], "confirm": ids, "items": preview, "done": False}
    deleted, refused = [], []
    for evidence_id in _claims_first(items):
        try:
            await gw.bus.rpc(
                account.principal,
                "ledger",
                "delete",
                {"evidence_id": evidence_id, "reason": f"clean-up of a {what}'s memory"},
            )
            deleted.append(evidence_id)
        except Refused as exc:
            log.info("cleanup_refused", evidence_id=evidence_id, code=exc.code)
            refused.append({"evidence_id": evidence_id, "code": exc.code, "message": exc.message})
    return {"deleted": deleted, "refused": refused, "confirm": ids, "done": True}


def _claims_first(items: list[dict[str, Any]]) -> list[str]:
    """The claims before the messages they were cut from: deleting a message deletes its claims
    too, and a claim deleted that way would answer its own delete as already done."""
    ordered = sorted(items, key=lambda item: item.get("claim_kind") == "message")
    return [str(item.get("evidence_id")) for item in ordered]


# --- variables (the ledger's store, compare-and-set) ----------------------------------------


@api.get("/sessions/{session_id}/variables", summary="A chat's variables with their revisions")
async def variables(
    session_id: str, account: User, gw: G, scope: VariableScope = "chat"
) -> dict[str, Any]:
    session_id = await own_session(gw, account, session_id)
    body = {"session_id": session_id, "scope": scope}
    return await gw.bus.rpc(account.principal, "ledger", "variable.list", body)


@api.post(
    "/sessions/{session_id}/variables",
    summary="Set a variable if its revision is still `expected_revision` (0: a new one)",
)
async def set_variable(session_id: str, body: VariableEdit, account: User, gw: G) -> dict[str, Any]:
    session_id = await own_session(gw, account, session_id)
    request = {
        "session_id": session_id,
        "scope": body.scope,
        "name": body.name,
        "value": body.value,
        "expected_revision": body.expected_revision,
    }
    return await gw.bus.rpc(account.principal, "ledger", "variable.set", request)


# --- the operator's view (the owner only) --------------------------------------------------


@api.get("/operator/status", summary="Services, streams, consumer lag, dead letters (owner)")
async def operator(account: Owner, gw: G) -> dict[str, Any]:
    from tavern_gateway.bus import operator_status

    return await operator_status(gw.bus.nc, gw.bus.js)


# --- pages ----------------------------------------------------------------------------------

pages = APIRouter(include_in_schema=False)


def _page(
    gw: Gateway, request: Request, name: str, account: Account | None, **context: Any
) -> HTMLResponse:
    csrf = request.cookies.get(CSRF_COOKIE) or accounts.new_secret()
    response = TEMPLATES.TemplateResponse(
        request, name, {"account": account, "csrf": csrf, **context}
    )
    if CSRF_COOKIE not in request.cookies:
        response.set_cookie(
            CSRF_COOKIE, csrf, httponly=False, secure=gw.secure_cookies, samesite="strict"
        )
    response.headers["Content-Security-Policy"] = PAGE_CSP  # the others: headers.py
    return response


async def _gate(request: Request, gw: Gateway) -> Account | Response:
    if not await gw.store.has_owner():
        return RedirectResponse("/setup", status_code=303)
    account = await signed_in(request, gw)
    if account is None:
        reason = "&expired=1" if SESSION_COOKIE in request.cookies else ""
        return RedirectResponse(f"/login?next={quote(request.url.path)}{reason}", status_code=303)
    return account


@pages.get("/")
async def index(request: Request, gw: G) -> Response:
    found = await _gate(request, gw)
    if isinstance(found, Response):
        return found
    return _page(gw, request, "index.html", found, title="Characters and chats")


@pages.get("/setup")
async def setup_page(request: Request, gw: G) -> Response:
    if await gw.store.has_owner():
        return RedirectResponse("/login", status_code=303)
    return _page(gw, request, "setup.html", None, title="Create the owner account")


@pages.get("/login")
async def login_page(request: Request, gw: G, expired: int = 0, next: str = "/") -> Response:
    if not await gw.store.has_owner():
        return RedirectResponse("/setup", status_code=303)
    return _page(
        gw,
        request,
        "login.html",
        None,
        title="Sign in",
        expired=bool(expired),
        next=navigation.safe_next(next),
    )


@pages.get("/invite/{token}")
async def invite_page(token: str, request: Request, gw: G) -> Response:
    usable = await gw.store.invite_open(token)
    return _page(gw, request, "invite.html", None, title="Join", token=token, usable=usable)


@pages.get("/chat/{session_id}")
async def chat_page(session_id: str, request: Request, gw: G) -> Response:
    found = await _gate(request, gw)
    if isinstance(found, Response):
        return found
    return _page(gw, request, "chat.html", found, title="Chat", session_id=sid(session_id))


@pages.get("/manage")
async def manage_page(request: Request, gw: G, session: str | None = None) -> Response:
    found = await _gate(request, gw)
    if isinstance(found, Response):
        return found
    chosen = sid(session) if session else None
    return _page(gw, request, "manage.html", found, title="Manage", session_id=chosen)
