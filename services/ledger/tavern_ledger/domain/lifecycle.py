"""Evidence state transitions (user rights and corrections): which are allowed, and the row each
produces. Evidence is append-only; these, and redaction, are the only changes a row may take.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from tavern_ledger.domain.records import EvidenceRow
from tavern_ledger.domain.text import estimate_tokens

REDACTED_TEXT = "[redacted]"
REVIEW_STATUS = {
    "quarantine": "quarantined_by_user",
    "release": "released",
    "rollback": "rolled_back",
}
"""The `reviewStatus` each operation leaves when no reason names one (acp.md §10: a quarantine's
reason is its review status; `rolled_back` is acp.md's word for a rollback)."""
LEGACY_REVIEW_STATUS = {"rollbackd": "rolled_back"}
"""Words stored by earlier versions -> the current one (migration 008 rewrites stored rows)."""
MAX_REVIEW_STATUS_CHARS = 64
CORRECTING_AUTHORITIES = frozenset({"user_explicit", "user_correction"})

Operation = str
"""`quarantine`, `release`, `redact`, `delete`, `rollback`, `supersede`."""

_FROM: dict[str, frozenset[str]] = {
    "quarantine": frozenset({"active", "superseded"}),
    "release": frozenset({"quarantined"}),
    "redact": frozenset({"active", "quarantined", "superseded"}),
    "delete": frozenset({"active", "quarantined", "superseded", "redacted"}),
    "rollback": frozenset({"superseded", "quarantined"}),
    "supersede": frozenset({"active"}),
}
_TO = {
    "quarantine": "quarantined",
    "release": "active",
    "redact": "redacted",
    "delete": "redacted",
    "rollback": "active",
    "supersede": "superseded",
}


class TransitionRefused(ValueError):
    """The row is not in a state `op` applies to (or the op would lose information)."""


@dataclass(frozen=True)
class Transition:
    before: EvidenceRow
    after: EvidenceRow

    @property
    def from_state(self) -> str:
        return self.before.state

    @property
    def to_state(self) -> str:
        return self.after.state


def check(row: EvidenceRow, op: Operation) -> None:
    allowed = _FROM.get(op)
    if allowed is None:
        raise TransitionRefused(f"unknown operation {op!r}")
    if row.state not in allowed:
        states = ", ".join(sorted(allowed))
        raise TransitionRefused(f"{op} applies to {states} evidence; {row.id} is {row.state}")
    if op == "delete" and row.metadata.get("reviewStatus") == "deleted_by_user":
        raise TransitionRefused(f"{row.id} is already deleted")


def apply(
    row: EvidenceRow,
    op: Operation,
    now: datetime,
    *,
    at: datetime | None = None,
    reason: str = "",
) -> Transition:
    """The row after `op` (raises TransitionRefused). `at`: when a supersession took effect,
    if not now (a correction said in conversation takes effect when it was said). `reason`:
    a quarantine's reason is the review status it stores (`needs_review`)."""
    check(row, op)
    after = replace(row, state=_TO[op], updated_at=now)
    if op in ("redact", "delete"):
        after = _scrubbed(after, "deleted_by_user" if op == "delete" else "redacted")
    elif op == "quarantine":
        status = review_status(op, reason)
        after = replace(after, metadata={**row.metadata, "reviewStatus": status})
    elif op in ("release", "rollback"):
        after = replace(after, metadata={**row.metadata, "reviewStatus": REVIEW_STATUS[op]})
        if row.state == "superseded":
            after = replace(after, valid_until=None)
    elif op == "supersede":
        after = replace(after, valid_until=row.valid_until or at or now)
    return Transition(row, after)


def review_status(op: Operation, reason: str = "") -> str:
    """What `op` writes to `reviewStatus`: a quarantine's stated reason (acp.md §10), else the
    operation's own word."""
    stated = reason.strip()[:MAX_REVIEW_STATUS_CHARS]
    if op == "quarantine" and stated:
        return stated
    return REVIEW_STATUS[op]


def upcast_review_status(metadata: dict[str, object]) -> dict[str, object]:
    """Metadata as stored by any version, with today's review-status words."""
    status = metadata.get("reviewStatus")
    if isinstance(status, str) and status in LEGACY_REVIEW_STATUS:
        return {**metadata, "reviewStatus": LEGACY_REVIEW_STATUS[status]}
    return metadata


def _scrubbed(row: EvidenceRow, status: str) -> EvidenceRow:
    """Redaction removes the text for good (the content hash stays, so the same text can never
    come back in through a replay or an import)."""
    return replace(
        row,
        content=REDACTED_TEXT,
        tokens=estimate_tokens(REDACTED_TEXT),
        flags=tuple(dict.fromkeys((*row.flags, "redacted"))),
        metadata={**row.metadata, "reviewStatus": status},
    )


def supersede_check(old: EvidenceRow, new_authority: str) -> None:
    """acp.md §4.4: only a user's explicit statement or correction replaces evidence."""
    if new_authority not in CORRECTING_AUTHORITIES:
        raise TransitionRefused(f"authority {new_authority} may not supersede evidence")
    if old.state != "active":
        raise TransitionRefused(f"only active evidence can be corrected; {old.id} is {old.state}")


def revoke_replacement(row: EvidenceRow, restored_id: str, now: datetime) -> EvidenceRow:
    """A rollback of `restored_id` takes it out of the rows that superseded it."""
    kept = tuple(s for s in row.supersedes if s != restored_id)
    return replace(row, supersedes=kept, updated_at=now)


def lineage(rows: dict[str, EvidenceRow], start: str) -> list[EvidenceRow]:
    """`start` and every row it supersedes, transitively (cycles and dangling ids tolerated),
    oldest first."""
    seen: dict[str, EvidenceRow] = {}
    stack = [start]
    while stack:
        current = stack.pop()
        row = rows.get(current)
        if row is None or current in seen:
            continue
        seen[current] = row
        stack.extend(row.supersedes)
    return sorted(seen.values(), key=lambda r: (r.observed_at, r.id))
