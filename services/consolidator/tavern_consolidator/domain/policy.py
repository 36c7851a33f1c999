"""Expression promotion policy (acp.md §17.2): floors that configuration can only make stricter,
and the pure evaluation of one proposed candidate against its evidence."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from tavern_consolidator.domain.records import Evidence
from tavern_consolidator.domain.vocabulary import strength

FLOOR_MIN_EVENTS = 2
FLOOR_MIN_STRONG = 1
CEILING_MAX_AGE_DAYS = 30


@dataclass(frozen=True)
class PolicyConfig:
    min_events: int = FLOOR_MIN_EVENTS
    min_strong: int = FLOOR_MIN_STRONG
    max_age_days: int = CEILING_MAX_AGE_DAYS
    same_conversation: bool = True
    auto_promote: bool = False


def effective(requested: PolicyConfig) -> PolicyConfig:
    """Floors hold whatever is asked: at least 2 events, 1 strong one, at most 30 days, always
    the same conversation; auto-promotion only when asked for exactly."""
    return PolicyConfig(
        min_events=max(requested.min_events, FLOOR_MIN_EVENTS),
        min_strong=max(requested.min_strong, FLOOR_MIN_STRONG),
        max_age_days=min(max(requested.max_age_days, 0), CEILING_MAX_AGE_DAYS),
        same_conversation=True,
        auto_promote=requested.auto_promote is True,
    )


@dataclass(frozen=True)
class Verdict:
    decision: str  # promote | hold | reject
    reason: str
    snapshot: dict[str, Any]


@dataclass(frozen=True)
class Counts:
    eligible: int
    fresh: int
    same_conversation: int
    supports: int
    strong_supporting: int

    @property
    def expired(self) -> int:
        return self.eligible - self.fresh


def _counts(rows: Sequence[Evidence], config: PolicyConfig, now: datetime) -> Counts:
    eligible = [r for r in rows if strength(r.authority) != "not_eligible"]
    fresh = [r for r in eligible if r.observed_at >= now - timedelta(days=config.max_age_days)]
    newest = max(fresh, key=lambda r: (r.observed_at, r.id), default=None)
    target = newest.session_id if newest is not None else ""
    same = [r for r in fresh if not target or r.session_id == target]
    strong = [r for r in same if strength(r.authority) == "strong"]
    return Counts(len(eligible), len(fresh), len(same), len(same), len(strong))


def evaluate(
    state: str,
    rows: Sequence[Evidence],
    conflicting: int,
    requested: PolicyConfig,
    now: datetime,
) -> Verdict:
    """promote / hold / reject, in the order of acp.md §17.2 (explicit opposition is not in
    the evidence the consolidator sees, so nothing opposes)."""
    config = effective(requested)
    counts = _counts(rows, config, now)
    decision, reason = _decide(state, counts, conflicting, config)
    snapshot = {
        **asdict(config),
        "floors": {"requested": asdict(requested), "effective": asdict(config)},
        "evaluatedAt": now.isoformat(),
        "counts": {**asdict(counts), "expired": counts.expired},
    }
    return Verdict(decision, reason, snapshot)


def _decide(state: str, c: Counts, conflicting: int, config: PolicyConfig) -> tuple[str, str]:
    if not config.auto_promote:
        return "hold", "automatic promotion disabled (auto_promote=false)"
    if state != "proposed":
        return "reject", f"state is {state}, not proposed"
    if conflicting:
        return "hold", "a conflicting candidate exists — left for review"
    if c.eligible and not c.fresh:
        return "hold", f"all compatible evidence expired (older than {config.max_age_days} days)"
    if c.strong_supporting < config.min_strong:
        return (
            "hold",
            f"{c.strong_supporting}/{config.min_strong} strong events ({c.supports} supporting)",
        )
    if c.same_conversation < config.min_events:
        return "hold", f"{c.same_conversation}/{config.min_events} compatible events"
    return (
        "promote",
        f"policy floors satisfied ({c.same_conversation}/{config.min_events} compatible events, "
        f"{c.strong_supporting}/{config.min_strong} strong supporting)",
    )
