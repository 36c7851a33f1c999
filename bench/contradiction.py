"""Corrections said in chat, through the real stack. Two sets, told to the ledger as user
messages, then asked over `tavern.rpc.ledger.recall`:

- the headline: the Letta core-memory dev set (564 contradiction cases in 100 fact worlds, data we
  did not write; `bench/letta_cases.py` loads it, `bench/contradiction_letta.py` plans and scores
  it: ten facts, "Correction: <contradicting fact>" in a later session, the case's question from
  a new chat; goals now and as-of ≥ 95%, distractors kept ≥ 98%);
- our own corpus, bench/data/contradiction.json: each case an old fact, a correction in natural
  phrasing and distractor facts about the same subject (below).

    .venv/bin/python -m bench.contradiction [--dataset letta|own|both] [--limit N] [--case ID]
        [--json OUT] [--verbose] [--corpus PATH] [--letta PATH]

Both sets are told in two phases, each waited for until ingested: every fact, then every
correction. `--verbose` prints every failed case on one line: which checks, what was superseded
instead, what each recall injected. Our own corpus:

Everything runs with the shipped defaults: the ledger and the consolidator as deployed (no model),
every session bound to a chat and a character and nothing else. Each case gets its own chats and
character in each variant, so no case sees another:

- `same-session`: distractors, the fact, then the correction, in one session; asked from there.
- `cross-session`: distractors and the fact in session 1 of chat A; the correction in session 2
  of chat A (even cases) or in a new chat B (odd cases); asked from a new chat C. All three chats
  have the same character.

Scored per language and variant:

- now: recall (no `as_of`) injects the correction and not the old fact;
- as-of: recall as of a day before the correction injects the old fact and not the correction,
  asked right after the "now" recall in the same session (so the live session's last injection
  is there to skew it, if as-of recall let it);
- distractors kept: every distractor's evidence is still active;
- old superseded: the old fact's evidence is superseded (the lineage `ledger correct` leaves);
- no-match (cases that correct an attribute never stated): nothing superseded, and the fact
  still injected.

An injected item counts as the old fact, the correction or a distractor by its source event; an
item from no message of the case (an observation, say) by the markers its text holds. The goal
of "now" and "as-of" is ≥ 95% in each language and variant (issue 18); distractors kept and
no-match are held to the same mark, since a correction that takes the wrong row loses a fact.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

if __name__ == "__main__" and not __package__:  # `python bench/contradiction.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.letta_cases import LettaCase

if TYPE_CHECKING:
    from bench.contradiction_letta import LettaOutcome, LettaPlan

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = ROOT / "bench" / "data" / "contradiction.json"
LANGS = ("en", "zh")
CATEGORIES = ("person", "place", "job", "preference", "number", "date")
FORMS: Mapping[str, str] = {
    "correction": r"^correction:",
    "actually": r"\bactually\b",
    "not_any_more": r"(\bnot\b|n't\b).*\bany more\b",
    "moved": r"\bmoved\b",
    "changed": r"\bchanged\b",
    "no_longer": r"\bno longer\b",
    "zh_correction": r"^更正：",  # noqa: RUF001
    "zh_actually": r"^其实",
    "zh_no_longer": r"不再",
    "zh_changed": r"改成|改为",
}
"""Every phrasing of a correction the corpus covers, and what its text must hold."""
VARIANTS = ("same-session", "cross-session")
GOAL = 95.0
Role = Literal["distractor", "fact", "correction"]
Kind = Literal["old", "new", "distractor", "other"]
T = TypeVar("T")
R = TypeVar("R")


# --- the corpus ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    id: str
    lang: str
    category: str
    subject: str
    form: str
    fact: str
    correction: str
    question: str
    distractors: tuple[str, ...]
    old_marker: str
    new_marker: str
    expect: Literal["supersede", "none"]
    subject_in_correction: bool = True


def load_corpus(path: Path = DEFAULT_CORPUS) -> list[Case]:
    raw = json.loads(path.read_text(encoding="utf-8"))
    return [Case(**{**c, "distractors": tuple(c["distractors"])}) for c in raw["cases"]]


def problems(cases: Sequence[Case]) -> list[str]:
    """What makes the corpus unfit to score, one line each (empty: fit)."""
    found: list[str] = []
    seen: set[str] = set()
    texts: set[tuple[str, str]] = set()
    for c in cases:
        where = f"{c.id}:"
        if c.id in seen or not re.fullmatch(r"[A-Za-z0-9_-]{1,40}", c.id):
            found.append(f"{where} id repeated or not [A-Za-z0-9_-]{{1,40}}")
        seen.add(c.id)
        if (c.fact, c.correction) in texts:
            found.append(f"{where} the same fact and correction as another case")
        texts.add((c.fact, c.correction))
        if c.lang not in LANGS or c.category not in CATEGORIES or c.form not in FORMS:
            found.append(f"{where} unknown lang, category or form")
            continue
        if c.form.startswith("zh_") != (c.lang == "zh"):
            found.append(f"{where} form {c.form} in {c.lang}")
        if not re.search(FORMS[c.form], c.correction, re.IGNORECASE):
            found.append(f"{where} the correction is not of form {c.form}")
        if not 2 <= len(c.distractors) <= 3:
            found.append(f"{where} {len(c.distractors)} distractors")
        if not all(t.strip() for t in (c.fact, c.correction, c.question, c.subject)):
            found.append(f"{where} an empty text")
        old, new = c.old_marker.lower(), c.new_marker.lower()
        if not old or not new or old not in c.fact.lower() or new not in c.correction.lower():
            found.append(f"{where} old marker not in the fact or new marker not in the correction")
        if new in c.fact.lower() or new in c.question.lower():
            found.append(f"{where} the new marker is in the fact or the question")
        if any(old in d.lower() or new in d.lower() for d in c.distractors):
            found.append(f"{where} a marker is in a distractor")
        if c.fact in c.distractors or c.correction in c.distractors:
            found.append(f"{where} a distractor repeats the fact or the correction")
        if c.expect == "none" and old in c.correction.lower():
            found.append(f"{where} a no-match correction names the old value")
    return found


# --- the plan of one case in one variant --------------------------------------------------------


@dataclass(frozen=True)
class Said:
    session_id: str
    text: str
    role: Role
    when: datetime


@dataclass(frozen=True)
class Session:
    session_id: str
    chat_id: str
    character_id: str
    created: datetime


@dataclass(frozen=True)
class Plan:
    case: Case
    variant: str
    sessions: tuple[Session, ...]
    said: tuple[Said, ...]
    ask_session: str
    as_of: datetime


def plan(case: Case, index: int, variant: str, t0: datetime) -> Plan:
    """The sessions and messages of `case` in `variant`: distractors and the fact on day 0, the
    correction on day 2, the question on day 3; as-of asks about day 1."""
    short = "ss" if variant == "same-session" else "xs"
    prefix = f"cb-{case.id}-{short}"
    character = prefix
    fixed_at = t0 + timedelta(days=2)
    first = Session(f"{prefix}-a-s1", f"{prefix}-a", character, t0)
    if variant == "same-session":
        sessions: tuple[Session, ...] = (first,)
        where = ask = first.session_id
    else:
        opened = fixed_at - timedelta(minutes=1)
        later = (
            Session(f"{prefix}-a-s2", f"{prefix}-a", character, opened)
            if index % 2 == 0
            else Session(f"{prefix}-b-s1", f"{prefix}-b", character, opened)
        )
        asking = Session(f"{prefix}-c-s1", f"{prefix}-c", character, t0 + timedelta(days=3))
        sessions = (first, later, asking)
        where, ask = later.session_id, asking.session_id
    said = [
        Said(first.session_id, d, "distractor", t0 + timedelta(minutes=i))
        for i, d in enumerate(case.distractors)
    ]
    said.append(Said(first.session_id, case.fact, "fact", t0 + timedelta(minutes=10)))
    said.append(Said(where, case.correction, "correction", fixed_at))
    return Plan(case, variant, sessions, tuple(said), ask, t0 + timedelta(days=1))


# --- scoring ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Item:
    """One injected item: its evidence, the message it came from (if any), its text."""

    evidence_id: str
    source_event_id: str | None
    content: str


def classify(item: Item, case: Case, roles: Mapping[str, Role]) -> Kind:
    """Old fact, correction or distractor by the item's source event; else by its markers."""
    role = roles.get(item.source_event_id or "")
    if role == "fact":
        return "old"
    if role == "correction":
        return "new"
    if role == "distractor":
        return "distractor"
    text = item.content.lower()
    if case.new_marker.lower() in text:
        return "new"
    if case.old_marker.lower() in text:
        return "old"
    return "other"


def shows_only(kinds: Iterable[Kind], wanted: Kind, unwanted: Kind) -> bool:
    found = set(kinds)
    return wanted in found and unwanted not in found


@dataclass(frozen=True)
class Outcome:
    """What one case in one variant scored; None where the check does not apply."""

    case_id: str
    lang: str
    variant: str
    expect: str
    now: bool | None
    as_of: bool | None
    distractors_kept: bool
    old_superseded: bool | None
    nothing_superseded: bool | None
    still_recalled: bool | None
    now_kinds: tuple[Kind, ...] = ()
    as_of_kinds: tuple[Kind, ...] = ()


def outcome(
    p: Plan,
    roles: Mapping[str, Role],
    states: Mapping[str, Sequence[str]],
    now: Sequence[Item],
    as_of: Sequence[Item],
) -> Outcome:
    """`states`: per source event of the case, the states of the evidence it left."""
    c = p.case
    now_kinds = tuple(classify(i, c, roles) for i in now)
    as_of_kinds = tuple(classify(i, c, roles) for i in as_of)
    by_role: dict[Role, list[str]] = defaultdict(list)
    for event_id, role in roles.items():
        by_role[role] += states.get(event_id, ["missing"])
    kept = all(s == "active" for s in by_role["distractor"]) and bool(by_role["distractor"])
    if c.expect == "none":
        every = [s for found in states.values() for s in found]
        return Outcome(
            c.id,
            c.lang,
            p.variant,
            c.expect,
            None,
            None,
            kept,
            None,
            "superseded" not in every and all(s == "active" for s in by_role["fact"]),
            "old" in now_kinds,
            now_kinds,
            as_of_kinds,
        )
    fact_states = by_role["fact"]
    return Outcome(
        c.id,
        c.lang,
        p.variant,
        c.expect,
        shows_only(now_kinds, "new", "old"),
        shows_only(as_of_kinds, "old", "new"),
        kept,
        bool(fact_states) and all(s == "superseded" for s in fact_states),
        None,
        None,
        now_kinds,
        as_of_kinds,
    )


CHECKS: Mapping[str, str] = {
    "now": "now: correction in, old fact out",
    "as_of": "as-of: old fact in, correction out",
    "distractors_kept": "distractors kept (active)",
    "old_superseded": "old fact superseded",
    "nothing_superseded": "no-match: nothing superseded",
    "still_recalled": "no-match: fact still injected",
}
GOALED = ("now", "as_of", "distractors_kept", "nothing_superseded")


@dataclass(frozen=True)
class Row:
    check: str
    lang: str
    variant: str
    n: int
    share: float
    failed: tuple[str, ...] = field(default=())


def rows(outcomes: Sequence[Outcome]) -> list[Row]:
    """Per check, language and variant: how many cases it applies to and the share (%) held."""
    found: list[Row] = []
    for check in CHECKS:
        for lang in LANGS:
            for variant in VARIANTS:
                held = [
                    (o.case_id, getattr(o, check))
                    for o in outcomes
                    if o.lang == lang and o.variant == variant and getattr(o, check) is not None
                ]
                if not held:
                    continue
                share = 100 * sum(1 for _, ok in held if ok) / len(held)
                failed = tuple(case_id for case_id, ok in held if not ok)
                found.append(Row(check, lang, variant, len(held), round(share, 1), failed))
    return found


def by_category(outcomes: Sequence[Outcome], cases: Sequence[Case]) -> dict[str, dict[str, float]]:
    """Per category (both languages and variants): the share (%) of cases that held "now" and
    "as-of", to see where a matcher falls short."""
    category = {c.id: c.category for c in cases}
    found: dict[str, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    for o in outcomes:
        for check in ("now", "as_of"):
            held = getattr(o, check)
            if held is not None:
                found[category[o.case_id]][check].append(held)
    return {
        cat: {check: round(100 * sum(v) / len(v), 1) for check, v in checks.items()}
        | {"n": len(checks["now"])}
        for cat, checks in found.items()
    }


def table(found: Sequence[Row]) -> str:
    lines = [f"{'what':38}{'lang':>5}  {'variant':14}{'n':>5}{'share':>8}  goal", "-" * 80]
    for r in found:
        goal = f"≥{GOAL:g}% {'met' if r.share >= GOAL else 'MISSED'}" if r.check in GOALED else ""
        lines.append(
            f"{CHECKS[r.check]:38}{r.lang:>5}  {r.variant:14}{r.n:>5}{r.share:>7.1f}%  {goal}"
        )
    return "\n".join(lines)


# --- the stack ----------------------------------------------------------------------------------


def _created(s: Session) -> Any:
    from tavern_events.ids import new_id
    from tavern_events.session import SessionCreated, SessionCreatedPayload

    payload = SessionCreatedPayload(
        architecture="agent-tavern",
        context_mode="dsh-native",
        chat_id=s.chat_id,
        character_id=s.character_id,
    )
    return SessionCreated(
        id=new_id(), session_id=s.session_id, seq=0, ts=s.created, source="host", payload=payload
    )


def _message(said: Said) -> Any:
    from tavern_events.ids import new_id
    from tavern_events.message import UserMessage, UserMessagePayload

    return UserMessage(
        id=new_id(),
        session_id=said.session_id,
        seq=0,
        ts=said.when,
        source="user",
        actor_id="user",
        payload=UserMessagePayload(text=said.text),
    )


Logs = dict[str, int]
"""Per session: the log position its appends so far left (absent: not logged yet)."""


async def publish(
    nc: Any, sessions: Sequence[Session], said: Sequence[Said], logs: Logs
) -> list[str]:
    """The sessions not logged yet (their creation) and the messages of `said`, each session's
    in one append after what its log holds; returns the event id of each message of `said`."""
    from tavern_runtime.sessionlog import SessionLogWriter

    writer = SessionLogWriter(nc)
    ids: dict[int, str] = {}
    for s in sessions:
        messages = [(i, _message(m)) for i, m in enumerate(said) if m.session_id == s.session_id]
        events = [*([] if s.session_id in logs else [_created(s)]), *(m for _, m in messages)]
        if events:
            head = logs.get(s.session_id, 0)
            await writer.append(s.session_id, events, expected_last=head)
            logs[s.session_id] = head + len(events)
            ids.update({i: m.id for i, m in messages})
    return [ids[i] for i in range(len(said))]


def phase(
    sessions: Sequence[Session], said: Sequence[Said], cutoff: datetime, early: bool
) -> tuple[list[Session], list[Said]]:
    """What a plan tells before `cutoff` (`early`: the facts, in the sessions opened by then) or
    from it on (the correction, and every session)."""
    opened = [s for s in sessions if not early or s.created < cutoff]
    return opened, [m for m in said if (m.when < cutoff) == early]


async def tell(nc: Any, p: Plan, early: bool, logs: Logs) -> dict[str, Role]:
    """The plan's sessions and messages of one phase into the session logs; returns event id ->
    role."""
    sessions, said = phase(p.sessions, p.said, p.as_of, early)
    ids = await publish(nc, sessions, said, logs)
    return {event_id: m.role for event_id, m in zip(ids, said, strict=True)}


async def gathered(
    items: Sequence[T], call: Callable[[T], Awaitable[R]], width: int = 8
) -> list[R]:
    """`call` on every item, `width` at a time, results in the order of `items`."""
    gate = asyncio.Semaphore(width)

    async def one(item: T) -> R:
        async with gate:
            return await call(item)

    return list(await asyncio.gather(*(one(i) for i in items)))


ROWS_PER_SESSION = 200
"""Evidence rows read back per session (the ledger's RPC cap): room for a message that became
several claims."""


async def evidence_of(nc: Any, sessions: Sequence[Session]) -> dict[str, dict[str, Any]]:
    """Every evidence row the sessions left, in any state, by evidence id."""
    from bench.memory_stack import rpc

    found: dict[str, dict[str, Any]] = {}
    for s in sessions:
        body = {"session_id": s.session_id, "state": "all", "limit": ROWS_PER_SESSION}
        reply = await rpc(nc, "query", body)
        found.update({row["evidence_id"]: row for row in reply["items"]})
    return found


def states_by_source(
    rows_by_id: Mapping[str, Mapping[str, Any]], sources: Iterable[str]
) -> dict[str, list[str]]:
    """Per source event of `sources`, the states of the evidence rows it left that recall may
    read: its claims (a message is kept whole beside them and never recalled, nor are its
    questions and small talk), or its one row where nothing was cut."""
    wanted = set(sources)
    found: dict[str, list[str]] = defaultdict(list)
    for row in rows_by_id.values():
        if row.get("source_event_id") in wanted and row.get("claim_kind") not in UNREAD:
            found[row["source_event_id"]].append(row["state"])
    return found


UNREAD = frozenset({"message", "question", "chatter"})
"""Rows recall never reads (`tavern_ledger.domain.segments.HELD`)."""


async def injected(
    nc: Any,
    ask_session: str,
    question: str,
    rows_by_id: dict[str, dict[str, Any]],
    step: int,
    as_of: datetime | None,
) -> list[Item]:
    from bench.memory_stack import rpc

    body: dict[str, Any] = {
        "session_id": ask_session,
        "query": question,
        "turn": 1,
        "step": step,
        "explain": True,
    }
    if as_of is not None:
        body["as_of"] = as_of.isoformat()
    reply = await rpc(nc, "recall", body)
    items = []
    for it in reply["items"]:
        evidence_id = it["evidence_id"]
        row = rows_by_id.get(evidence_id)
        if row is None:
            row = await _inspect(nc, evidence_id)
            rows_by_id[evidence_id] = row
        items.append(Item(evidence_id, it.get("source_event_id"), str(row.get("content", ""))))
    return items


async def _inspect(nc: Any, evidence_id: str) -> dict[str, Any]:
    """The row of an item from outside the case's sessions, or (not an evidence row, e.g. an
    observation) an empty one: it is then judged by the source event the recall gave."""
    from tavern_events import subjects

    body = json.dumps({"evidence_id": evidence_id}).encode()
    reply = await nc.request(subjects.rpc("ledger", "inspect"), body, 15)
    found: dict[str, Any] = json.loads(reply.data)
    if "error" in found:
        return {}
    return found


async def score(nc: Any, p: Plan, roles: Mapping[str, Role]) -> Outcome:
    rows_by_id = await evidence_of(nc, p.sessions)
    states = states_by_source(rows_by_id, roles)
    now = await injected(nc, p.ask_session, p.case.question, rows_by_id, 1, None)
    before = await injected(nc, p.ask_session, p.case.question, rows_by_id, 2, p.as_of)
    return outcome(p, roles, states, now, before)


async def told(
    nc: Any, stack: Any, plans: Sequence[Plan], letta_plans: Sequence[LettaPlan]
) -> tuple[list[dict[str, Role]], list[dict[str, int]]]:
    """Every plan told in two phases, each waited for until ingested: the facts, then the
    corrections, as a user says them days apart. (Told at once, a batch of facts the ledger
    retries, after a deadlock say, can come back after the correction that replaces it.)"""
    from bench import contradiction_letta as lb
    from bench.memory_stack import caught_up

    logs: Logs = {}
    roles: list[dict[str, Role]] = [{} for _ in plans]
    refs: list[dict[str, int]] = [{} for _ in letta_plans]
    for early in (True, False):
        own = await gathered(plans, partial(tell, nc, early=early, logs=logs))
        letta = await gathered(letta_plans, partial(lb.tell, nc, early=early, logs=logs))
        for role, more_roles in zip(roles, own, strict=True):
            role.update(more_roles)
        for ref, more_refs in zip(refs, letta, strict=True):
            ref.update(more_refs)
        await caught_up(nc, stack)
    return roles, refs


@dataclass(frozen=True)
class Runs:
    """What one run of both sets scored, and what it cost."""

    own: list[Outcome]
    letta: list[LettaOutcome]
    extra: dict[str, Any]


async def run_sets(cases: Sequence[Case], letta: Sequence[LettaCase]) -> Runs:
    """Our corpus (both variants) and the Letta cases through one fresh stack: every plan told,
    ingestion waited for once, then every plan scored."""
    from bench import contradiction_letta as lb
    from bench.ledger import signed
    from bench.memory_stack import memory_stack, observations

    t0 = (datetime.now(UTC) - timedelta(days=30)).replace(microsecond=0)
    plans = [plan(c, i, v, t0) for v in VARIANTS for i, c in enumerate(cases)]
    letta_plans = [lb.plan(c, t0) for c in letta]
    async with memory_stack() as stack:
        nc = await signed(stack.nats_url)  # the loop for the local owner
        try:
            started = time.perf_counter()
            roles, refs = await told(nc, stack, plans, letta_plans)
            fed = time.perf_counter() - started
            messages = sum(len(p.said) for p in plans) + sum(len(p.said) for p in letta_plans)
            print(
                f"  {len(plans) + len(letta_plans)} plans ({messages} messages) told and "
                f"ingested in {fed:.1f} s",
                flush=True,
            )
            started = time.perf_counter()
            own = await gathered(list(zip(plans, roles, strict=True)), lambda pr: score(nc, *pr))
            pairs = list(zip(letta_plans, refs, strict=True))
            scored = await gathered(pairs, lambda pr: lb.score(nc, *pr))
            asked = time.perf_counter() - started
            made = await observations(stack)
        finally:
            await nc.close()
    extra = {"ingest_s": round(fed, 1), "score_s": round(asked, 1), "observations": made}
    return Runs(own, scored, extra)


async def run(cases: Sequence[Case]) -> tuple[list[Outcome], dict[str, Any]]:
    """Our corpus alone."""
    runs = await run_sets(cases, ())
    return runs.own, runs.extra


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=("letta", "own", "both"), default="both")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="our own corpus")
    parser.add_argument("--letta", type=Path, default=None, help="the Letta dev set (JSONL)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument(
        "--limit",
        type=int,
        default=0,
        help="only the first N Letta cases, and our first N per language and expectation",
    )
    parser.add_argument("--case", action="append", default=[], help="only this case id (repeat)")
    parser.add_argument("--verbose", action="store_true", help="print every failed case")
    return parser.parse_args(argv)


def pick(cases: Sequence[Case], limit: int) -> list[Case]:
    """The first `limit` cases of each language and expectation (all when 0)."""
    if not limit:
        return list(cases)
    counts: dict[tuple[str, str], int] = defaultdict(int)
    found = []
    for c in cases:
        counts[(c.lang, c.expect)] += 1
        if counts[(c.lang, c.expect)] <= limit:
            found.append(c)
    return found


def as_json(
    found: Sequence[Row], outcomes: Sequence[Outcome], extra: Mapping[str, Any]
) -> dict[str, Any]:
    return {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "settings": "shipped defaults (ledger and consolidator, no model)",
        "goal_pct": GOAL,
        **extra,
        "rows": [
            {
                "what": r.check,
                "lang": r.lang,
                "variant": r.variant,
                "n": r.n,
                "share": r.share,
                "failed": list(r.failed),
            }
            for r in found
        ],
        "cases": [
            {
                "id": o.case_id,
                "variant": o.variant,
                "now": list(o.now_kinds),
                "as_of": list(o.as_of_kinds),
            }
            for o in outcomes
        ],
    }


def explain(o: Outcome) -> str:
    """One line for a case of our corpus that failed a check: which, and what was injected."""
    checks = [c for c in CHECKS if getattr(o, c) is False]
    return (
        f"{o.case_id} ({o.variant}) failed {','.join(checks)} | now [{' '.join(o.now_kinds)}] "
        f"as-of [{' '.join(o.as_of_kinds)}]"
    )


@dataclass(frozen=True)
class Chosen:
    own: list[Case]
    letta: list[LettaCase]


def choose(args: argparse.Namespace) -> Chosen | str:
    """The cases the arguments pick, or why none can run."""
    from bench.letta_cases import DEFAULT_DATA, load_cases
    from bench.letta_cases import problems as letta_problems

    own = pick(load_corpus(args.corpus), args.limit) if args.dataset != "letta" else []
    letta = load_cases(args.letta or DEFAULT_DATA) if args.dataset != "own" else []
    letta = letta[: args.limit] if args.limit else letta
    if args.case:
        wanted = set(args.case)
        own = [c for c in own if c.id in wanted]
        letta = [c for c in letta if c.id in wanted]
        unknown = wanted - {c.id for c in own} - {c.id for c in letta}
        if unknown:
            return f"no such case: {', '.join(sorted(unknown))}"
    unfit = problems(own) + letta_problems(letta)
    if unfit:
        return "the cases are unfit:\n  " + "\n  ".join(unfit)
    return Chosen(own, letta)


def report_letta(runs: Runs, cases: Sequence[LettaCase], verbose: bool) -> dict[str, Any]:
    from bench import contradiction_letta as lb

    found = lb.rows(runs.letta)
    worlds = len({c.world for c in cases})
    print(
        f"\nLetta core-memory dev set (data we did not write): {len(cases)} cases, {worlds} worlds"
    )
    print(lb.table(found))
    failures = [o for o in runs.letta if lb.failed(o)]
    print(f"{len(failures)} of {len(runs.letta)} cases failed a check")
    if verbose:
        by_id = {c.id: c for c in cases}
        for o in failures:
            print("  " + lb.explain(o, by_id[o.case_id]))
    return lb.as_json(found, runs.letta)


def report_own(runs: Runs, cases: Sequence[Case], verbose: bool) -> dict[str, Any]:
    langs = {lang: sum(1 for c in cases if c.lang == lang) for lang in LANGS}
    found = rows(runs.own)
    print(f"\nour own corpus: {len(cases)} cases ({langs}), variants {', '.join(VARIANTS)}")
    print(table(found))
    categories = by_category(runs.own, cases)
    print(
        "by category (both languages and variants): "
        + "; ".join(
            f"{cat} now {v['now']:.0f}% as-of {v['as_of']:.0f}% (n={v['n']})"
            for cat, v in categories.items()
        )
    )
    if verbose:
        for o in runs.own:
            if any(getattr(o, c) is False for c in CHECKS):
                print("  " + explain(o))
    return as_json(found, runs.own, {"by_category": categories})


def main(argv: list[str] | None = None) -> int:
    from tavern_runtime.logs import configure_logging

    args = parse_args(argv)
    configure_logging("bench", level="WARNING")
    chosen = choose(args)
    if isinstance(chosen, str):
        print(chosen, file=sys.stderr)
        return 2
    print(
        f"{len(chosen.letta)} Letta cases, {len(chosen.own)} of our own; shipped defaults "
        "(ledger and consolidator, no model)"
    )
    started = time.time()
    runs = asyncio.run(run_sets(chosen.own, chosen.letta))
    figures: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "settings": "shipped defaults (ledger and consolidator, no model)",
        **runs.extra,
    }
    if chosen.letta:
        figures["letta"] = report_letta(runs, chosen.letta, args.verbose)
    if chosen.own:
        figures["own"] = report_own(runs, chosen.own, args.verbose)
    print(f"\nobservations distilled meanwhile: {runs.extra['observations']}")
    print(f"{time.time() - started:.0f} s, {os.cpu_count()} cpus")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
