"""The rules feedback channel (acp.md §18): drafts from corrections, the human decisions
(accept / reject / pin / unpin) carried to the ledger, and the rule views rebuilt from it."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from tavern_consolidator.domain import feedback
from tavern_consolidator.domain.feedback import Candidate
from tavern_consolidator.domain.intake import RuleView
from tavern_consolidator.errors import NotFound, RequestInvalid
from tavern_consolidator.ledger_client import LedgerClient
from tavern_consolidator.store import Conn, PoolSource, audit, connection, rules, transaction
from tavern_consolidator.store.facts import human_evidence_since, save_rule
from tavern_runtime.logs import get_logger

log = get_logger(__name__)

Clock = Callable[[], datetime]


@dataclass(frozen=True)
class FeedbackConfig:
    daily_runs: int = 4
    window_days: int = 7
    overlap: float = 0.6
    rules_dir: Path | None = None


def _listed_rule(r: dict[str, Any], index: int) -> dict[str, Any]:
    warn = feedback.SAFETY_MARK if feedback.over_safety_line(r["text"]) else None
    return {"n": index, **r, "warning": warn}


class Feedback:
    def __init__(
        self, pool: PoolSource, ledger: LedgerClient, config: FeedbackConfig, clock: Clock
    ) -> None:
        self._pool, self._ledger, self._config, self._clock = pool, ledger, config, clock

    async def draft(self, scope_id: str) -> dict[str, Any]:
        """Draft rules from the scope's recent corrections (capped per UTC day: a run counts
        when it had candidates). The reads come first, outside a transaction: most wakes find
        nothing to draft; when they find some, the same reads and the writes run again in one
        transaction."""
        now = self._clock()
        async with connection(self._pool) as conn:
            found = await self._candidates(conn, scope_id, now)
        if isinstance(found, dict):
            return found
        async with transaction(self._pool) as conn:
            found = await self._candidates(conn, scope_id, now)
            if isinstance(found, dict):
                return found
            await rules.count_draft_run(conn, scope_id, now.date())
            active = rules.active_rules(await rules.active(conn, scope_id))
            drafted = sum([await self._judge(conn, scope_id, c, active) for c in found])
        log.info("rules_drafted", scope_id=scope_id, candidates=len(found), drafted=drafted)
        return {
            "ran": True,
            "candidates": len(found),
            "drafted": drafted,
            "covered": len(found) - drafted,
        }

    async def _candidates(
        self, conn: Conn, scope_id: str, now: datetime
    ) -> dict[str, Any] | list[Candidate]:
        """The scope's draft candidates, or the reply of a run that drafts nothing."""
        day, count = await rules.draft_runs(conn, scope_id)
        if feedback.drafts_today(day, count, now.date()) >= self._config.daily_runs:
            return {"ran": False, "reason": "daily_cap"}
        since = now - timedelta(days=self._config.window_days)
        rows = await human_evidence_since(conn, scope_id, since)
        seen = await rules.judged(conn, scope_id) if rows else frozenset[str]()
        found = feedback.candidates(rows, seen, now, self._config.window_days)
        return found or {"ran": True, "candidates": 0, "drafted": 0, "covered": 0}

    async def _judge(
        self, conn: Conn, scope_id: str, c: Candidate, active: Sequence[feedback.ActiveRule]
    ) -> int:
        """Draft the candidate (1), or audit it as repeating an active rule (0)."""
        hit = feedback.suspect(c.body, active, self._config.overlap)
        if hit is not None:
            await _suspected(conn, scope_id, c, hit)
            return 0
        d = feedback.draft(scope_id, c)
        await rules.save_draft(conn, d)
        await rules.judge(conn, scope_id, c.evidence.id, "drafted", d.id)
        payload = {"evidenceId": c.evidence.id, "gates": list(d.gates)}
        reason = "G1/G2 candidate drafted"
        await audit.append(
            conn, audit.Entry("rule_drafted", scope_id, "feedback", reason, d.id, payload)
        )
        return 1

    async def listing(self, scope_id: str) -> dict[str, Any]:
        async with connection(self._pool) as conn:
            drafts = await rules.drafts(conn, scope_id)
            active = await rules.active(conn, scope_id)
        return {
            "scope_id": scope_id,
            "drafts": [_listed_rule(r, i) for i, r in enumerate(drafts, start=1)],
            "active": [_listed_rule(r, i) for i, r in enumerate(active, start=1)],
        }

    async def decide(self, scope_id: str, op: str, ref: str, actor: str) -> dict[str, Any]:
        """accept / reject a draft, pin / unpin an active rule; `ref` is a 1-based index into
        the list `listing` shows, or an id."""
        if op in ("accept", "reject"):
            draft = await self._pick(scope_id, ref, drafts=True)
            return await (
                self._accept(draft, actor) if op == "accept" else self._reject(draft, actor)
            )
        if op in ("pin", "unpin"):
            rule = await self._pick(scope_id, ref, drafts=False)
            reply = await self._ledger.consolidation(
                "rule.pin",
                rule_id=rule["id"],
                pinned=op == "pin",
                reason=f"rules {op}",
                actor=actor,
            )
            await self._viewed(reply["rule"])
            return reply
        raise RequestInvalid(f"unknown rules operation {op!r}")

    async def _pick(self, scope_id: str, ref: str, *, drafts: bool) -> dict[str, Any]:
        async with connection(self._pool) as conn:
            rows = await (rules.drafts(conn, scope_id) if drafts else rules.active(conn, scope_id))
        if ref.isdigit() and 1 <= int(ref) <= len(rows):
            return rows[int(ref) - 1]
        for row in rows:
            if row["id"] == ref:
                return row
        kind = "draft" if drafts else "active rule"
        raise NotFound(f"no {kind} {ref!r} in scope {scope_id!r}")

    async def _accept(self, d: dict[str, Any], actor: str) -> dict[str, Any]:
        reply = await self._ledger.consolidation(
            "rule.activate",
            scope_id=d["scope_id"],
            domain=d["domain"],
            title=d["title"],
            text=d["text"],
            gates=d["gates"],
            evidence_ids=d["evidence_ids"],
            reason="rules accept",
            actor=actor,
        )
        async with transaction(self._pool) as conn:
            await rules.decide_draft(conn, d["id"], "accepted", actor)
            await audit.append(
                conn, audit.Entry("rule_accepted", d["scope_id"], actor, "rules accept", d["id"])
            )
        await self._viewed(reply["rule"])
        return reply

    async def _reject(self, d: dict[str, Any], actor: str) -> dict[str, Any]:
        async with transaction(self._pool) as conn:
            await rules.decide_draft(conn, d["id"], "rejected", actor)
            await audit.append(
                conn, audit.Entry("rule_rejected", d["scope_id"], actor, "rules reject", d["id"])
            )
        return {"rejected": d["id"]}

    async def _viewed(self, rule: dict[str, Any]) -> None:
        """Take the ledger's reply into the view at once (the RuleChanged fact follows)."""
        async with transaction(self._pool) as conn:
            await save_rule(conn, _rule_view(rule, self._clock()))
        await self.write_views()

    async def rebuild(self, scope_id: str | None) -> dict[str, Any]:
        """Replace the rule view with what the ledger lists, then rewrite the rule files."""
        reply = await self._ledger.consolidation(
            "rule.list", scope_id=scope_id, state="active", limit=1000
        )
        now = self._clock()
        views = [_rule_view(r, now) for r in reply["rules"]]
        async with transaction(self._pool) as conn:
            await rules.replace_view(conn, scope_id, views)
        written = await self.write_views()
        log.info("rule_view_rebuilt", scope_id=scope_id, rules=len(views), files=written)
        return {"rules": len(views), "files": written}

    async def write_views(self) -> int:
        """`<rules_dir>/<domain>.md` per domain with active rules; stale files of ours removed,
        except when no domain is active (then nothing is deleted)."""
        target = self._config.rules_dir
        if target is None:
            return 0
        async with connection(self._pool) as conn:
            active = await rules.all_active(conn)
        return _write_views(target, active)


async def _suspected(conn: Conn, scope_id: str, c: Candidate, hit: feedback.Suspect) -> None:
    """The rule may be ineffective: audited (and logged), never drafted again."""
    await rules.judge(conn, scope_id, c.evidence.id, "suspect", hit.rule.id)
    payload = {"evidenceId": c.evidence.id, "overlap": hit.overlap, "ruleTitle": hit.rule.title}
    reason = "correction overlaps active rule (rule may be ineffective)"
    entry = audit.Entry(
        "rule_ineffective_suspect", scope_id, "feedback", reason, hit.rule.id, payload
    )
    await audit.append(conn, entry)
    log.warning("rule_ineffective_suspect", scope_id=scope_id, rule_id=hit.rule.id, **payload)


def _rule_view(r: dict[str, Any], now: datetime) -> RuleView:
    updated = r.get("updated_at")
    at = datetime.fromisoformat(updated) if isinstance(updated, str) else now
    return RuleView(
        r["id"],
        r["scope_id"],
        r["domain"],
        r["title"],
        r["text"],
        r["state"],
        bool(r.get("pinned")),
        tuple(r.get("evidence_ids") or ()),
        at,
    )


def _write_views(target: Path, active: Sequence[dict[str, Any]]) -> int:
    target.mkdir(parents=True, exist_ok=True)
    by_domain: dict[str, list[dict[str, Any]]] = {}
    for r in active:
        by_domain.setdefault(r["domain"], []).append(r)
    for domain, rows in by_domain.items():
        body = feedback.render_view(
            domain,
            [feedback.ActiveRule(r["id"], r["title"], r["text"]) for r in rows],
            frozenset(r["id"] for r in rows if r["pinned"]),
        )
        temp = target / f".{feedback.view_file(domain)}.tmp"
        temp.write_text(body, encoding="utf-8")
        temp.replace(target / feedback.view_file(domain))
    ours = [p.name for p in target.glob("*.md") if _is_ours(p)]
    stale = feedback.stale_views(ours, by_domain)
    if not by_domain:
        log.warning("rule_views_kept", directory=str(target), kept=len(ours))
    for name in stale:
        with contextlib.suppress(OSError):
            (target / name).unlink()
    return len(by_domain)


def _is_ours(path: Path) -> bool:
    try:
        head = path.read_text(encoding="utf-8")[:200]
    except OSError:
        return False
    return head.startswith("---") and f"kind: {feedback.VIEW_KIND}" in head
