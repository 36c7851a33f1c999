"""Export and import of the ledger as JSONL streams (evidence, observations, candidates, audit).

Export is paged by a cursor so each reply stays small; import is idempotent (evidence by
content hash within its scope, the rest by id) and keeps every id, so a round trip reproduces the
same ledger. Every imported row passes the write gate as any write does (`domain.imports`); an
import into a named scope (a user's) moves every row there under ids derived for that scope.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from tavern_ledger import audit, outbox
from tavern_ledger.changes import Actor
from tavern_ledger.consolidation.candidates import candidate_id
from tavern_ledger.domain import imports
from tavern_ledger.domain import portability as port
from tavern_ledger.domain.facts import evidence_appended, outbox_record
from tavern_ledger.domain.gates import GateConfig
from tavern_ledger.domain.records import AuditEntry, EvidenceRow
from tavern_ledger.errors import RequestInvalid, StoreRejected, translated
from tavern_ledger.evidence import Conn, observations, portable
from tavern_ledger.evidence import rows as evidence
from tavern_ledger.ingest import Clock, utc_now
from tavern_ledger.transactions import PoolSource, connection, transaction

MAX_PAGE_BYTES = 400 * 1024


@dataclass(frozen=True)
class ExportRequest:
    scope_id: str | None = None
    streams: tuple[str, ...] = port.STREAMS
    include_non_active: bool = False
    cursor: str | None = None
    limit: int = 500


@dataclass
class Cursor:
    """Where an export continues: stream index, keyset position, and the export's ts."""

    stream: int = 0
    key: list[Any] = field(default_factory=list)
    ts: int = 0

    def encode(self) -> str:
        return json.dumps({"s": self.stream, "k": self.key, "ts": self.ts})

    @classmethod
    def decode(cls, text: str | None, now_ms: int) -> Cursor:
        if not text:
            return cls(0, [], now_ms)
        try:
            raw = json.loads(text)
            return cls(int(raw["s"]), list(raw["k"]), int(raw["ts"]))
        except (ValueError, KeyError, TypeError):
            raise RequestInvalid("malformed export cursor") from None


@dataclass
class ImportReport:
    """What an import did, line by line: `errors` are lines that are no export line at all,
    `refused` rows (or claims) the gates refused, `quarantined` rows stored out of recall."""

    inserted: dict[str, int] = field(default_factory=lambda: dict.fromkeys(port.STREAMS, 0))
    skipped: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)
    refused: list[dict[str, Any]] = field(default_factory=list)
    quarantined: list[dict[str, Any]] = field(default_factory=list)
    facts: list[EvidenceRow] = field(default_factory=list)
    renamed: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "inserted": self.inserted,
            "skipped": self.skipped,
            "errors": self.errors,
            "refused": self.refused,
            "quarantined": self.quarantined,
        }


@dataclass(frozen=True)
class ImportRequest:
    """An import; `scope_id` moves every row into that one scope (a user's import), and
    `restore_audit` lets audit lines in (the operator's restore of a whole ledger)."""

    text: str
    scope_id: str | None = None
    restore_audit: bool = True


class Transfer:
    def __init__(self, pool: PoolSource, gate: GateConfig, clock: Clock = utc_now) -> None:
        self._pool, self._gate, self._clock = pool, gate, clock

    # --- export -----------------------------------------------------------------------------

    async def export(self, req: ExportRequest, actor: Actor) -> dict[str, Any]:
        """One page of JSONL lines and the cursor of the next page (None at the end)."""
        cursor = Cursor.decode(req.cursor, int(time.time() * 1000))
        unknown = set(req.streams) - set(port.STREAMS)
        if unknown:
            raise RequestInvalid(f"unknown export streams: {sorted(unknown)}")
        streams = [s for s in port.STREAMS if s in req.streams]
        lines: list[str] = []
        async with connection(self._pool) as conn:
            if req.cursor is None:
                await audit.append_one(conn, _export_audit(req, actor))
            while cursor.stream < len(streams) and not _full(lines, req.limit):
                fetched = await _page(conn, streams[cursor.stream], req, cursor, req.limit)
                lines += fetched
                if len(fetched) < req.limit:
                    cursor = Cursor(cursor.stream + 1, [], cursor.ts)
        done = cursor.stream >= len(streams)
        return {"lines": lines, "cursor": None if done else cursor.encode()}

    # --- import -----------------------------------------------------------------------------

    async def import_jsonl(self, req: ImportRequest | str, actor: Actor) -> dict[str, Any]:
        req = ImportRequest(req) if isinstance(req, str) else req
        report = ImportReport()
        now = self._clock()
        async with transaction(self._pool) as conn:
            for number, raw in enumerate(req.text.splitlines(), start=1):
                if raw.strip():
                    await self._import_line(conn, req, number, raw, report)
            await portable.sync_audit_sequence(conn)
            await portable.relink_claims(conn, report.renamed, [r.id for r in report.facts])
            facts = [outbox_record(evidence_appended(r, now, actor.name)) for r in report.facts]
            await outbox.enqueue(conn, facts)
            await audit.append_one(conn, _import_audit(report, actor, req.scope_id))
        return report.as_dict()

    async def _import_line(
        self, conn: Conn, req: ImportRequest, number: int, raw: str, report: ImportReport
    ) -> None:
        try:
            parsed = port.parse_line(raw.strip())
            async with conn.transaction():  # a savepoint: one bad line undoes only itself
                with translated():
                    stored = await self._restore(conn, req, number, parsed, report)
        except imports.ImportRefused as exc:
            report.refused.append({"line": number, "reasons": [str(exc)[:300]]})
            return
        except (port.LineInvalid, StoreRejected) as exc:
            report.errors.append({"line": number, "message": str(exc)[:300]})
            return
        if stored:
            report.inserted[parsed.kind] += 1
        else:
            report.skipped += 1

    async def _restore(
        self,
        conn: Conn,
        req: ImportRequest,
        number: int,
        parsed: port.ParsedLine,
        report: ImportReport,
    ) -> bool:
        if parsed.kind == "evidence":
            row = port.parse_evidence(parsed.data)
            return await self._restore_evidence(conn, req, number, row, report)
        if parsed.kind == "observation":
            return await self._restore_observation(conn, req, number, parsed.data, report)
        if parsed.kind == "candidate":
            found = port.parse_candidate(parsed.data)
            data = _candidate_into(found.data, req.scope_id, report.renamed)
            return await portable.insert_candidate(conn, data, found.events)
        if not req.restore_audit:
            raise imports.ImportRefused("audit lines are restored by the operator only")
        return await portable.insert_audit(conn, port.parse_audit(parsed.data))

    async def _restore_evidence(
        self, conn: Conn, req: ImportRequest, number: int, row: EvidenceRow, report: ImportReport
    ) -> bool:
        """Through the write gate and the lifecycle's rules (`domain.imports`); idempotent by
        content hash within the row's scope."""
        original = row.id
        admitted = imports.admit_evidence(row, req.scope_id, self._gate)
        row = admitted.row
        targets = [report.renamed.get(old, old) for old in row.supersedes]
        known = {r.id: r.scope_id for r in await evidence.get_many(conn, targets)}
        kept, refused = imports.supersession(row, report.renamed, known)
        row = replace(row, supersedes=kept)
        existing = await evidence.by_content_hash(
            conn, row.content_hash, row.scope_id, claim=row.claim_of is not None
        )
        if existing is not None:
            report.renamed[original] = existing
            return False
        if row.id != original:
            report.renamed[original] = row.id
        inserted = await evidence.insert(conn, [row])
        if refused:
            report.refused.append({"line": number, "id": row.id, "reasons": list(refused)})
        if admitted.quarantined:
            entry = {"line": number, "id": row.id, "reasons": list(admitted.quarantined)}
            report.quarantined.append(entry)
        report.facts += inserted
        return bool(inserted)

    async def _restore_observation(
        self,
        conn: Conn,
        req: ImportRequest,
        number: int,
        data: dict[str, Any],
        report: ImportReport,
    ) -> bool:
        parsed = port.parse_observation(data)
        row, reasons = imports.admit_observation(parsed, req.scope_id, report.renamed, self._gate)
        stored = await observations.insert(conn, [row]) == 1
        if stored and reasons:
            report.quarantined.append({"line": number, "id": row.id, "reasons": list(reasons)})
        return stored


def _candidate_into(
    data: dict[str, Any], scope_id: str | None, renamed: dict[str, str]
) -> dict[str, Any]:
    """A candidate moved into `scope_id` with its evidence's ids there (its decision reason
    and event log kept as they came)."""
    if scope_id is None or (scope_id == data["scopeId"] and not renamed):
        return data
    members = [renamed.get(str(e), str(e)) for e in data.get("evidenceIds") or ()]
    moved = {**data, "scopeId": scope_id, "evidenceIds": members}
    return {**moved, "id": candidate_id(scope_id, str(data["domain"]), members)}


def _full(lines: list[str], limit: int) -> bool:
    return len(lines) >= limit or sum(len(line) for line in lines) >= MAX_PAGE_BYTES


async def _page(
    conn: Conn, stream: str, req: ExportRequest, cursor: Cursor, limit: int
) -> list[str]:
    """The next lines of `stream` after the cursor; moves the cursor's key."""
    if stream == "audit":
        rows = await portable.audit_page(
            conn, req.scope_id, int(cursor.key[0] if cursor.key else 0), limit
        )
        if rows:
            cursor.key = [rows[-1]["id"]]
        return [port.line("audit", _audit_data(r), cursor.ts) for r in rows]
    after = (datetime.fromisoformat(cursor.key[0]), str(cursor.key[1])) if cursor.key else None
    data = await _stream_data(conn, stream, req, after, limit)
    if data:
        cursor.key = [data[-1]["createdAt"], data[-1]["id"]]
    return [port.line(stream, d, cursor.ts) for d in data]


async def _stream_data(
    conn: Conn,
    stream: str,
    req: ExportRequest,
    after: tuple[datetime, str] | None,
    limit: int,
) -> list[dict[str, Any]]:
    scope, every = req.scope_id, req.include_non_active
    if stream == "evidence":
        rows = await portable.evidence_page(conn, scope, every, after, limit)
        return [port.evidence_data(r) for r in rows]
    if stream == "observation":
        found = await portable.observation_page(conn, scope, every, after, limit)
        return [port.observation_data(r) for r in found]
    return await portable.candidate_page(conn, scope, after, limit)


def _audit_data(r: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": r["id"],
        "ts": r["ts"],
        "op": r["op"],
        "targetId": r["target_id"],
        "scopeId": r["scope_id"],
        "actor": r["actor"],
        "reason": r["reason"],
        "payload": r["payload"],
    }


def _export_audit(req: ExportRequest, actor: Actor) -> AuditEntry:
    return AuditEntry(
        op="export",
        scope_id=req.scope_id or "*",
        actor=actor.name,
        reason=actor.reason or "user export",
        payload={
            "format": "jsonl",
            "streams": list(req.streams),
            "include_non_active": req.include_non_active,
        },
    )


def _import_audit(report: ImportReport, actor: Actor, scope_id: str | None) -> AuditEntry:
    return AuditEntry(
        op="import",
        scope_id=scope_id or "*",
        actor=actor.name,
        reason=actor.reason or "import jsonl",
        payload={
            "inserted": report.inserted,
            "skipped": report.skipped,
            "errors": len(report.errors),
            "refused": len(report.refused),
            "quarantined": len(report.quarantined),
        },
    )
