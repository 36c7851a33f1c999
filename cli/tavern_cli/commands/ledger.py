"""`tavern ledger`: the user's rights over the memory ledger, through `tavern.rpc.ledger.*`.

    tavern ledger query [--session S | --scope S] [--state all] [--text T] [--as-of ISO]
    tavern ledger inspect|history ID
    tavern ledger correct [ID] --text "..." [--session S] [--reason R]
    tavern ledger release|quarantine|redact|delete|rollback ID [--reason R]
    tavern ledger export [--scope S] [--all-states] [--streams evidence,audit] [-o FILE]
    tavern ledger import FILE [--scope S]     (--scope: every row into that scope; a user's must)
    tavern ledger stats [--scope S] | audit [--op OP] [--by ACTOR] [--target ID]
    tavern ledger recall --session S QUERY [--as-of ISO] [--explain]

Every change is audited under `--actor` (default: your login name) with `--reason`.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from nats.aio.client import Client

from tavern_cli.endpoints import nats_connection, resolve
from tavern_cli.failure import fail
from tavern_cli.rundir import Layout, data_dir_from_env
from tavern_events import subjects
from tavern_events.replies import timeout_headers
from tavern_runtime.errors import ConfigurationError

TRANSITIONS = ("release", "quarantine", "redact", "delete", "rollback")
IMPORT_CHUNK_BYTES = 256 * 1024
TIMEOUT_S = 30.0


def configure(parser: argparse.ArgumentParser) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--nats-url", help="NATS server (default: env, then `tavern up`)")
    common.add_argument("--actor", default=_login(), help="who you are, for the audit trail")
    common.add_argument("--reason", default="", help="why, for the audit trail")
    ops = parser.add_subparsers(dest="op", metavar="OP", required=True)

    def op(name: str, help_text: str) -> argparse.ArgumentParser:
        return ops.add_parser(name, help=help_text, parents=[common])

    _query(op("query", "list evidence (newest first)"))
    op("inspect", "one evidence row, its governance and audit trail").add_argument("evidence_id")
    op("history", "the lineage of one evidence row").add_argument("evidence_id")
    correct = op("correct", "correct evidence (the old row is superseded, with lineage)")
    correct.add_argument("evidence_id", nargs="?")
    correct.add_argument("--text", required=True)
    correct.add_argument("--session")
    correct.add_argument("--scope")
    for name in TRANSITIONS:
        op(name, f"{name} one evidence row (audited)").add_argument("evidence_id")
    _export(op("export", "write the ledger as JSONL"))
    imported = op("import", "read a JSONL export (idempotent; every row through the write gate)")
    imported.add_argument("file")
    imported.add_argument(
        "--scope", help="import every row into this scope (a user: one of theirs)"
    )
    op("stats", "counts by state and source").add_argument("--scope")
    _audit(op("audit", "the audit trail, newest first"))
    _recall(op("recall", "what recall would inject for a session"))


def _login() -> str:
    try:
        return getpass.getuser() or "user"
    except (KeyError, OSError):
        return "user"


def _query(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scope")
    p.add_argument("--session")
    p.add_argument("--state", default="active")
    p.add_argument("--domain")
    p.add_argument("--authority")
    p.add_argument("--source-class")
    p.add_argument("--text")
    p.add_argument("--as-of")
    p.add_argument("--limit", type=int, default=50)


def _export(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scope")
    p.add_argument("--all-states", action="store_true", help="include non-active evidence")
    p.add_argument("--streams", default="evidence,observation,candidate,audit")
    p.add_argument("-o", "--output", type=Path, help="file to write (default: stdout)")


def _audit(p: argparse.ArgumentParser) -> None:
    p.add_argument("--op", dest="op_filter", help="only this operation")
    p.add_argument("--scope")
    p.add_argument("--by")
    p.add_argument("--target")
    p.add_argument("--limit", type=int, default=50)


def _recall(p: argparse.ArgumentParser) -> None:
    p.add_argument("--session", required=True)
    p.add_argument("query")
    p.add_argument("--as-of")
    p.add_argument("--explain", action="store_true")


def run(args: argparse.Namespace, extra: list[str]) -> int:
    if args.op == "import":
        problem = unreadable(Path(args.file))
        if problem:
            return fail("ledger", f"cannot import {args.file}: {problem}")
    try:
        return asyncio.run(_run(args))
    except ConfigurationError as exc:
        fail("ledger", exc.message)
        return 2


def unreadable(path: Path) -> str | None:
    """Why `path` cannot be an export to import (None: it can), checked before connecting."""
    if not path.exists():
        return "no such file"
    if not path.is_file():
        return "not a file"
    try:
        with path.open(encoding="utf-8") as handle:
            for _ in handle:
                pass
    except UnicodeDecodeError as exc:
        return f"not UTF-8 text (byte {exc.start}); a ledger export is JSON lines"
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return None


async def _run(args: argparse.Namespace) -> int:
    endpoints = resolve(Layout(data_dir_from_env()), nats_url=args.nats_url)
    async with nats_connection(endpoints) as nc:
        client = LedgerClient(nc, args.actor, args.reason)
        return await perform(client, args, sys.stdout)


class LedgerClient:
    """Request/reply to the ledger; an `{"error": ...}` reply raises `LedgerRefused`."""

    def __init__(self, nc: Client, actor: str, reason: str = "") -> None:
        self._nc, self._actor, self._reason = nc, actor, reason

    async def call(self, operation: str, /, **body: Any) -> dict[str, Any]:
        payload = {"actor": self._actor, "reason": self._reason, **body}
        clean = {k: v for k, v in payload.items() if v is not None}
        reply = await self._nc.request(
            subjects.rpc("ledger", operation),
            json.dumps(clean).encode(),
            timeout=TIMEOUT_S,
            headers=timeout_headers(TIMEOUT_S),
        )
        found: dict[str, Any] = json.loads(reply.data)
        if "error" in found:
            raise LedgerRefused(found["error"])
        return found


class LedgerRefused(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.error = error


async def perform(client: LedgerClient, args: argparse.Namespace, out: TextIO) -> int:
    """Run one `tavern ledger` operation, printing JSON (or JSONL for export)."""
    try:
        if args.op == "export":
            await export(client, args, out)
        elif args.op == "import":
            found = await import_file(client, Path(args.file), getattr(args, "scope", None))
            _print(out, found)
            if found["errors"]:
                rejected = len(found["errors"])
                print(f"tavern ledger: {rejected} line(s) rejected (see errors)", file=sys.stderr)
                return 1
        else:
            op, body = request_of(args)
            _print(out, await client.call(op, **body))
    except LedgerRefused as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 1
    return 0


def request_of(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """The RPC and body of every operation but export and import."""
    op = args.op
    if op in ("inspect", "history", *TRANSITIONS):
        return op, {"evidence_id": args.evidence_id}
    if op == "correct":
        body = {"evidence_id": args.evidence_id, "text": args.text, "session_id": args.session}
        return op, {**body, "scope_id": args.scope}
    if op == "stats":
        return op, {"scope_id": args.scope}
    if op == "audit":
        body = {"op": args.op_filter, "scope_id": args.scope, "by": args.by}
        return op, {**body, "target_id": args.target, "limit": args.limit}
    if op == "recall":
        body = {"session_id": args.session, "query": args.query, "as_of": args.as_of}
        return op, {**body, "explain": args.explain}
    return "query", {
        "scope_id": args.scope,
        "session_id": args.session,
        "state": args.state,
        "claim_domain": args.domain,
        "authority": args.authority,
        "source_class": args.source_class,
        "text": args.text,
        "as_of": args.as_of,
        "limit": args.limit,
    }


def _print(out: TextIO, value: Any) -> None:
    out.write(json.dumps(value, ensure_ascii=False, indent=2) + "\n")


async def export(client: LedgerClient, args: argparse.Namespace, out: TextIO) -> int:
    """Page through the export; each line is one JSON object."""
    streams = [s.strip() for s in args.streams.split(",") if s.strip()]
    target = args.output.open("w", encoding="utf-8") if args.output else out
    cursor, count = None, 0
    try:
        while True:
            page = await client.call(
                "export",
                scope_id=args.scope,
                streams=streams,
                include_non_active=args.all_states,
                cursor=cursor,
            )
            for line in page["lines"]:
                target.write(line + "\n")
            count += len(page["lines"])
            if (cursor := page["cursor"]) is None:
                return count
    finally:
        if args.output:
            target.close()


def chunks(lines: Iterator[str], limit: int = IMPORT_CHUNK_BYTES) -> Iterator[list[str]]:
    """Lines grouped so each group's JSON stays under `limit` bytes (a longer line goes alone)."""
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


async def import_file(
    client: LedgerClient, path: Path, scope_id: str | None = None
) -> dict[str, Any]:
    """Send the file in chunks; line numbers in errors refer to the whole file."""
    total: dict[str, Any] = {
        "inserted": {},
        "skipped": 0,
        "errors": [],
        "refused": [],
        "quarantined": [],
    }
    offset = 0
    with path.open(encoding="utf-8") as handle:
        for group in chunks(line.rstrip("\n") for line in handle):
            body: dict[str, Any] = {"jsonl": "\n".join(group)}
            if scope_id:
                body["scope_id"] = scope_id
            reply = await client.call("import", **body)
            for kind, n in reply["inserted"].items():
                total["inserted"][kind] = total["inserted"].get(kind, 0) + n
            total["skipped"] += reply["skipped"]
            for key in ("errors", "refused", "quarantined"):
                found = reply.get(key) or []
                total[key] += [{**e, "line": e["line"] + offset} for e in found]
            offset += len(group)
    return total
