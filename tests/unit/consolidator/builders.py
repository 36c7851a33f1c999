"""Records for the consolidator's unit tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tavern_consolidator.domain.records import Evidence, Observation

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def evidence(
    n: int = 1,
    text: str = "I like green tea",
    *,
    authority: str = "user_explicit",
    domain: str = "user_fact",
    session: str = "s1",
    at: datetime | None = None,
    state: str = "active",
) -> Evidence:
    return Evidence(
        id=f"ev_{n:024d}",
        scope_id="c1",
        session_id=session,
        text=text,
        authority=authority,
        claim_domain=domain,
        observed_at=at or T0 + timedelta(seconds=n),
        state=state,
        seq=n,
        event_id=f"e{n}",
    )


def observation(
    n: int = 1,
    text: str = "likes green tea",
    *,
    subject: str = "tea",
    domain: str = "user_preference",
    evidence_ids: tuple[str, ...] = (),
    at: datetime | None = None,
    state: str = "active",
) -> Observation:
    return Observation(
        id=f"obs_{n:024d}",
        scope_id="c1",
        subject=subject,
        predicate="likes",
        claim_domain=domain,
        authority="user_explicit",
        text=text,
        observed_at=at or T0 + timedelta(seconds=n),
        evidence_ids=evidence_ids,
        state=state,
    )
