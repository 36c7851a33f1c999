"""The read side of governance: the authority x domain eligibility matrix (acp.md §4.3) and the
read gate (§7): scope, state, validity window ("as of") and eligibility.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from tavern_ledger.domain.vocabulary import CLAIM_DOMAINS

_ALL = frozenset(CLAIM_DOMAINS)
_NO_PROFILE_OR_STYLE = frozenset({"user_fact", "work", "experience", "external_fact"})
MATRIX: Mapping[str, frozenset[str]] = {
    "system_policy": _ALL,
    "user_explicit": _ALL,
    "user_correction": _ALL,
    "single_observation": _NO_PROFILE_OR_STYLE,
    "agent_inference": frozenset(),
    "agent_self_evaluation": frozenset(),
    "external_information": _NO_PROFILE_OR_STYLE,
}
NOT_INJECTABLE = frozenset({"quarantined", "redacted"})


def eligible(authority: str | None, domain: str | None) -> bool:
    """Whether `authority` may speak for `domain`; unknown authorities are not judged (legacy
    callers, rules), an unknown domain with a known authority is refused."""
    if authority is None or authority not in MATRIX:
        return True
    if domain is None:
        return True
    return domain in MATRIX[authority]


@dataclass(frozen=True)
class ReadContext:
    """Who reads: the scope, and for a historical view the instant to read "as of"."""

    scope_id: str | None = None
    valid_at: datetime | None = None
    allow_superseded: bool = False


@dataclass(frozen=True)
class Readable:
    """The fields of a record the read gate looks at."""

    state: str
    scope_id: str
    authority: str | None
    claim_domain: str | None
    valid_from: datetime | None = None
    valid_until: datetime | None = None


def read_gate(item: Readable, ctx: ReadContext) -> tuple[str, ...]:
    """Why `item` may not be read in `ctx` (empty: it may). First failing rule wins."""
    if item.state in NOT_INJECTABLE:
        return ("state not injectable",)
    if item.state == "superseded" and not ctx.allow_superseded:
        return ("superseded by newer evidence",)
    if ctx.scope_id is not None and item.scope_id != ctx.scope_id:
        return ("scope mismatch",)
    if ctx.valid_at is not None:
        window = _outside(item, ctx.valid_at)
        if window:
            return (window,)
    if not eligible(item.authority, item.claim_domain):
        return (f"authority not permitted for target domain: {item.claim_domain}",)
    return ()


def _outside(item: Readable, at: datetime) -> str | None:
    """Validity is the half-open window [valid_from, valid_until)."""
    if item.valid_from is not None and item.valid_from > at:
        return "not yet valid"
    if item.valid_until is not None and item.valid_until <= at:
        return "expired"
    return None
