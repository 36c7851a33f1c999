"""The rules feedback channel (acp.md §18): which corrections become rule drafts (explicit
prefix, or the same correction repeated), the "rule may be ineffective" check, the 40-character
safety line, and the human-readable rule views."""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from tavern_consolidator.domain.records import Evidence
from tavern_consolidator.domain.text import non_space_len, overlap

FULLWIDTH_COLON = "\uff1a"
PREFIXES: tuple[str, ...] = tuple(
    f"{word}{colon}"
    for word in ("记住", "更正", "规则", "please remember", "remember", "correction", "rule")
    for colon in (FULLWIDTH_COLON, ":")
)
"""G1 explicit prefixes, matched case-insensitively on the trimmed text."""
PREFIX_MIN_BODY = 4
"""The text must be longer than its prefix by more than 3 characters."""
REPEAT_KEY_CHARS = 24
REPEAT_MIN = 2
BATCH = 3
SUSPECT_MIN_CHARS = 10
SAFE_CHARS = 40
"""A rule longer than this may be dropped whole by the default 60-token rules section."""
SAFETY_MARK = "⚠ over the 40-character safety line (may be dropped whole)"
DEFAULT_DOMAIN = "habit"
RULE_AUTHORITIES = frozenset({"user_correction", "user_explicit"})
DIRECTIVE_DOMAINS = frozenset({"style", "user_preference"})
"""Only a directive to the assistant becomes a rule draft: a correction of a fact about the
person or their world ("Correction: my sister lives in Lisbon") is memory, never a rule."""
VIEW_KIND = "acp-rules"


@dataclass(frozen=True)
class Candidate:
    evidence: Evidence
    gate: str  # explicit-prefix | repeated-2x
    body: str


@dataclass(frozen=True)
class Draft:
    id: str
    scope_id: str
    domain: str
    title: str
    text: str
    gates: tuple[str, ...]
    evidence_ids: tuple[str, ...]


@dataclass(frozen=True)
class ActiveRule:
    id: str
    title: str
    text: str


@dataclass(frozen=True)
class Suspect:
    rule: ActiveRule
    overlap: float


def rule_id(scope_id: str, domain: str, text: str) -> str:
    """Same as the ledger's: `rule_` + sha256(scope|domain|text)[:24]."""
    return "rule_" + hashlib.sha256(f"{scope_id}|{domain}|{text}".encode()).hexdigest()[:24]


def explicit_body(text: str) -> str | None:
    """The text after a G1 prefix (`记住` or `remember` and a colon), or None."""
    trimmed = text.strip()
    folded = trimmed.casefold()
    for prefix in PREFIXES:
        if folded.startswith(prefix) and len(trimmed) >= len(prefix) + PREFIX_MIN_BODY:
            return trimmed[len(prefix) :].strip()
    return None


def repeat_key(text: str) -> str:
    return " ".join(text.split())[:REPEAT_KEY_CHARS]


def in_window(e: Evidence, now: datetime, days: int) -> bool:
    return e.observed_at >= now - timedelta(days=days)


def candidates(
    evidence: Iterable[Evidence], seen: frozenset[str], now: datetime, window_days: int
) -> list[Candidate]:
    """G1 first, then G2 (the latest of a correction said twice), directives only; each
    evidence once, evidence already drafted or judged is left out; at most `BATCH`."""
    rows = [
        e
        for e in sorted(evidence, key=lambda e: (e.observed_at, e.id))
        if e.state == "active"
        and e.authority in RULE_AUTHORITIES
        and e.claim_domain in DIRECTIVE_DOMAINS
        and in_window(e, now, window_days)
    ]
    found: dict[str, Candidate] = {}
    for e in rows:
        body = explicit_body(e.text)
        if body is not None:
            found.setdefault(e.id, Candidate(e, "explicit-prefix", body))
    for e in _repeated(rows):
        found.setdefault(e.id, Candidate(e, "repeated-2x", e.text.strip()))
    return [c for c in found.values() if c.evidence.id not in seen][:BATCH]


def _repeated(rows: Sequence[Evidence]) -> list[Evidence]:
    groups: dict[str, list[Evidence]] = defaultdict(list)
    for e in rows:
        if e.authority == "user_correction":
            groups[repeat_key(e.text)].append(e)
    return [group[-1] for group in groups.values() if len(group) >= REPEAT_MIN]


def suspect(body: str, active: Iterable[ActiveRule], threshold: float) -> Suspect | None:
    """A correction that repeats an active rule means the rule may not be working."""
    if non_space_len(body) < SUSPECT_MIN_CHARS:
        return None
    scored = [(overlap(body, r.text), r) for r in active]
    hits = [(score, r) for score, r in scored if score >= threshold]
    if not hits:
        return None
    score, rule = max(hits, key=lambda h: h[0])
    return Suspect(rule, round(score, 3))


def draft(scope_id: str, c: Candidate) -> Draft:
    text = c.body[:200]
    return Draft(
        id=rule_id(scope_id, DEFAULT_DOMAIN, text),
        scope_id=scope_id,
        domain=DEFAULT_DOMAIN,
        title=text[:60],
        text=text,
        gates=(c.gate,),
        evidence_ids=(c.evidence.id,),
    )


def over_safety_line(text: str) -> bool:
    return len(text) > SAFE_CHARS


def drafts_today(day: date | None, count: int, today: date) -> int:
    return count if day == today else 0


_UNSAFE = re.compile(r"[^a-z0-9_-]")


def view_file(domain: str) -> str:
    return f"{_UNSAFE.sub('-', domain.lower()) or 'rules'}.md"


def render_view(domain: str, rules: Sequence[ActiveRule], pinned: frozenset[str]) -> str:
    """A `<domain>.md` rule view: frontmatter marks it as ours, one bullet per active rule."""
    lines = ["---", f"kind: {VIEW_KIND}", f"domain: {domain}", "---", "", f"# {domain}", ""]
    for rule in rules:
        pin = " (pinned)" if rule.id in pinned else ""
        lines.append(f"- {rule.text}{pin}  <!-- {rule.id} -->")
    return "\n".join(lines) + "\n"


def stale_views(ours: Iterable[str], domains: Iterable[str]) -> list[str]:
    """Our view files whose domain has no active rule any more; none at all when the active
    domain set is empty (an empty read must never sweep a directory of real rules)."""
    wanted = {view_file(d) for d in domains}
    if not wanted:
        return []
    return sorted(f for f in ours if f not in wanted)
