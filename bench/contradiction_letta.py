"""The Letta dev set's cases through the real stack, the contradiction bench's headline table
(`bench/contradiction.py` runs it; the cases are `bench/letta_cases.py`'s).

Each case gets its own character and chats, so cases of the same fact world never see each other:
session 1 of chat A says the ten facts, one user message each, in order (day 0); once they are
ingested, a later session says "Correction: <contradicting fact>" (day 2), in chat A for even
cases and in a new chat B for odd ones; the question is asked from a new chat C (day 3), now and
as of day 1.

Scored per case, by source event (a message may have left one evidence row or several claims
sharing its source event):

- now: recall injects the correction and nothing of the replaced facts;
- as-of: recall as of day 1 injects every replaced fact and nothing of the correction;
- distractors kept (per fact): every row of a fact the correction does not replace that recall
  reads (its claims) is active;
- old superseded: no row of a replaced fact is active and one is superseded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from bench.contradiction import (
    Item,
    Logs,
    Said,
    Session,
    evidence_of,
    injected,
    phase,
    publish,
    states_by_source,
)
from bench.letta_cases import LettaCase

CORRECTION = -1
"""The ref of the correction message; a fact's ref is its index."""
GOALS: Mapping[str, float] = {"now": 95.0, "as_of": 95.0, "distractors_kept": 98.0}
CHECKS: Mapping[str, str] = {
    "now": "now: correction in, old fact out",
    "as_of": "as-of: old fact in, correction out",
    "distractors_kept": "distractors kept (per fact)",
    "old_superseded": "old fact superseded",
}
WHERE = ("same chat", "new chat")
"""Where the correction is said: a later session of chat A, or a new chat B."""


@dataclass(frozen=True)
class LettaPlan:
    case: LettaCase
    where: Literal["same chat", "new chat"]
    sessions: tuple[Session, ...]
    said: tuple[Said, ...]
    refs: tuple[int, ...]
    """Per message of `said`: the fact's index, or CORRECTION."""
    ask_session: str
    as_of: datetime


def plan(case: LettaCase, t0: datetime) -> LettaPlan:
    """Even cases (by their number, so `--case` reproduces a case of the whole run) correct in
    chat A, odd ones in chat B."""
    prefix = f"lb-{case.id}"
    fixed_at = t0 + timedelta(days=2)
    first = Session(f"{prefix}-a-s1", f"{prefix}-a", prefix, t0)
    same = case.number % 2 == 0
    chat = "a-s2" if same else "b-s1"
    opened = fixed_at - timedelta(minutes=1)
    later = Session(f"{prefix}-{chat}", f"{prefix}-{chat[0]}", prefix, opened)
    asking = Session(f"{prefix}-c-s1", f"{prefix}-c", prefix, t0 + timedelta(days=3))
    facts = [
        Said(first.session_id, fact, "fact", t0 + timedelta(minutes=1 + i))
        for i, fact in enumerate(case.facts)
    ]
    said = (*facts, Said(later.session_id, case.correction, "correction", fixed_at))
    refs = (*range(len(case.facts)), CORRECTION)
    return LettaPlan(
        case,
        "same chat" if same else "new chat",
        (first, later, asking),
        said,
        refs,
        asking.session_id,
        t0 + timedelta(days=1),
    )


# --- scoring ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LettaOutcome:
    case_id: str
    world: str
    where: str
    supporting: tuple[int, ...]
    now: bool
    as_of: bool
    distractors: int
    lost: tuple[int, ...]
    """Distractor facts not kept (a row superseded, or none left)."""
    old_superseded: bool
    superseded: tuple[int, ...]
    """Facts any of whose rows were superseded."""
    now_refs: tuple[str, ...]
    as_of_refs: tuple[str, ...]

    @property
    def distractors_kept(self) -> bool:
        return not self.lost


def label(ref: int | None) -> str:
    """`f<i>` for a fact, `C` for the correction, `other` for an item from no message."""
    if ref is None:
        return "other"
    return "C" if ref == CORRECTION else f"f{ref}"


def outcome(
    p: LettaPlan,
    refs: Mapping[str, int],
    states: Mapping[str, Sequence[str]],
    now: Sequence[Item],
    as_of: Sequence[Item],
) -> LettaOutcome:
    """`refs`: source event id -> ref; `states`: per source event, the states of its rows."""
    c = p.case
    by_ref = {ref: list(states.get(event_id, [])) for event_id, ref in refs.items()}
    now_refs = [refs.get(i.source_event_id or "") for i in now]
    as_of_refs = [refs.get(i.source_event_id or "") for i in as_of]
    old = set(c.supporting)
    return LettaOutcome(
        c.id,
        c.world,
        p.where,
        c.supporting,
        CORRECTION in now_refs and not old & set(now_refs),
        old <= set(as_of_refs) and CORRECTION not in as_of_refs,
        len(c.distractors),
        tuple(i for i in c.distractors if not _kept(by_ref.get(i, []))),
        all(_superseded(by_ref.get(i, [])) for i in c.supporting),
        tuple(i for i in range(len(c.facts)) if "superseded" in by_ref.get(i, [])),
        tuple(label(r) for r in now_refs),
        tuple(label(r) for r in as_of_refs),
    )


def _kept(states: Sequence[str]) -> bool:
    """Kept: it left rows and every one is still active."""
    return bool(states) and all(s == "active" for s in states)


def _superseded(states: Sequence[str]) -> bool:
    """Superseded: none of its rows is active, and one was superseded."""
    return "superseded" in states and "active" not in states


@dataclass(frozen=True)
class LettaRow:
    check: str
    where: str
    """`all`, or one of WHERE."""
    n: int
    share: float


def rows(outcomes: Sequence[LettaOutcome]) -> list[LettaRow]:
    """Per check, over every case and per where the correction was said: n and the share held
    (distractors kept counts facts, the others cases)."""
    found = []
    for check in CHECKS:
        for where in ("all", *WHERE):
            picked = [o for o in outcomes if where in ("all", o.where)]
            if picked:
                n, held = _tally(check, picked)
                found.append(LettaRow(check, where, n, round(100 * held / n, 1) if n else 0.0))
    return found


def _tally(check: str, outcomes: Sequence[LettaOutcome]) -> tuple[int, int]:
    if check == "distractors_kept":
        n = sum(o.distractors for o in outcomes)
        return n, n - sum(len(o.lost) for o in outcomes)
    return len(outcomes), sum(1 for o in outcomes if getattr(o, check))


def table(found: Sequence[LettaRow]) -> str:
    """One line per check: n and share over every case, then per where the correction was said,
    and the goal judged on every case."""
    head = f"{'what':36}{'n':>6}{'all':>8}{'same chat':>11}{'new chat':>10}  goal"
    lines = [head, "-" * 84]
    for check, what in CHECKS.items():
        mine = {r.where: r for r in found if r.check == check}
        if "all" not in mine:
            continue
        shares = "".join(
            f"{mine[w].share:>{width}.1f}%" if w in mine else f"{'-':>{width + 1}}"
            for w, width in (("all", 7), ("same chat", 10), ("new chat", 9))
        )
        goal = GOALS.get(check)
        met = mine["all"].share >= goal if goal else False
        verdict = f"≥{goal:g}% {'met' if met else 'MISSED'}" if goal else ""
        lines.append(f"{what:36}{mine['all'].n:>6}{shares}  {verdict}")
    return "\n".join(lines)


def failed(o: LettaOutcome) -> list[str]:
    return [c for c in CHECKS if c != "distractors_kept" and not getattr(o, c)] + (
        ["distractors_kept"] if o.lost else []
    )


def explain(o: LettaOutcome, case: LettaCase) -> str:
    """One line for a case that failed a check: which, what was superseded instead, what each
    recall injected, and the correction's text."""
    old = " ".join(f"f{i}" for i in o.supporting)
    superseded = " ".join(f"f{i}" for i in o.superseded) or "none"
    lost = f", lost {' '.join(f'f{i}' for i in o.lost)}" if o.lost else ""
    return (
        f"{o.case_id} {o.world} ({o.where}) failed {','.join(failed(o))}: replaces {old}, "
        f"superseded {superseded}{lost} | now [{' '.join(o.now_refs)}] "
        f"as-of [{' '.join(o.as_of_refs)}] | {case.correction}"
    )


def as_json(found: Sequence[LettaRow], outcomes: Sequence[LettaOutcome]) -> dict[str, Any]:
    return {
        "source": "letta-ai/letta-evals core-memory-update, dev half (Apache-2.0)",
        "goals_pct": dict(GOALS),
        "rows": [{"what": r.check, "where": r.where, "n": r.n, "share": r.share} for r in found],
        "cases": [
            {
                "id": o.case_id,
                "world": o.world,
                "where": o.where,
                "failed": failed(o),
                "supporting": list(o.supporting),
                "superseded": list(o.superseded),
                "lost": list(o.lost),
                "now": list(o.now_refs),
                "as_of": list(o.as_of_refs),
            }
            for o in outcomes
        ],
    }


# --- the stack ----------------------------------------------------------------------------------


async def tell(nc: Any, p: LettaPlan, early: bool, logs: Logs) -> dict[str, int]:
    """The plan's sessions and messages of one phase into the session logs (the facts, or the
    correction); returns event id -> ref."""
    sessions, said = phase(p.sessions, p.said, p.as_of, early)
    ref_of = dict(zip(p.said, p.refs, strict=True))
    ids = await publish(nc, sessions, said, logs)
    return {event_id: ref_of[m] for event_id, m in zip(ids, said, strict=True)}


async def score(nc: Any, p: LettaPlan, refs: Mapping[str, int]) -> LettaOutcome:
    rows_by_id = await evidence_of(nc, p.sessions)
    states = states_by_source(rows_by_id, refs)
    now = await injected(nc, p.ask_session, p.case.question, rows_by_id, 1, None)
    before = await injected(nc, p.ask_session, p.case.question, rows_by_id, 2, p.as_of)
    return outcome(p, refs, states, now, before)
