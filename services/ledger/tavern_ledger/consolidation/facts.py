"""RuleChanged facts (LEDGER stream) of feedback-channel rules; the id names the rule and the audit
entry of the change, so a republished fact is deduplicated."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tavern_events.ledger import RuleChanged, RuleChangedPayload

PINNED_GATE = "always"
FACT_STATE = {"draft": "draft", "active": "active", "rejected": "rejected", "superseded": "retired"}
"""Table state -> contract state (a superseded rule is `retired` on the stream)."""


def rule_changed(row: dict[str, Any], audit_id: int, now: datetime, actor: str) -> RuleChanged:
    return RuleChanged(
        id=f"{row['id']}-a{audit_id}",
        scope_id=row["scope_id"],
        ts=now,
        actor=actor,
        payload=RuleChangedPayload(
            rule_id=row["id"],
            state=FACT_STATE[row["state"]],
            domain=row["domain"],
            title=row["title"],
            text=row["text"],
            pinned=PINNED_GATE in row["gates"],
            evidence_ids=tuple(row["evidence_ids"]),
            revision=f"a{audit_id}",
        ),
    )
