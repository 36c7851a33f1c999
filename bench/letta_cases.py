"""The Letta core-memory contradiction cases as plain data, and a fast offline check of a
correction matcher over them (no servers, no stack): for people tuning the matcher.

    .venv/bin/python -m bench.letta_cases [DATA] [--limit N] [--verbose]

DATA defaults to ../shared/data/letta-core-memory-dev.jsonl beside the repository (the public dev
half of letta-ai/letta-evals' core-memory-update set, Apache-2.0). It is read in place and never
copied into this repository; the other half of that source is the held-out check and is never
fetched. Each case: ten facts of a fact world, a question, the fact that contradicts some of them
and the indices of the facts it replaces.

The offline check gives the shipped matcher (`tavern_ledger.domain.contradiction.targets`) the
case's correction, "Correction: <contradicting fact>", and the ten facts, and scores what it picks.
It skips what the ledger does around it (the candidate search by probe terms, splitting a message
into claims), so it is a quick guide; `bench.contradiction` measures the real stack.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

if __name__ == "__main__" and not __package__:  # `python bench/letta_cases.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "letta-core-memory-dev.jsonl"
CORRECTION_PREFIX = "Correction: "


@dataclass(frozen=True)
class LettaCase:
    id: str
    """`letta-<number>`."""
    number: int
    """The case's line in the file (from 0): even cases are corrected in the same chat."""
    world: str
    """`w<n>`: the fact world (the same ten facts), numbered in order of first appearance."""
    question: str
    answer: str
    facts: tuple[str, ...]
    contradicting_fact: str
    contradicting_answer: str
    supporting: tuple[int, ...]
    """The indices of the facts the contradicting fact replaces."""

    @property
    def correction(self) -> str:
        """What the user says in the later session."""
        return CORRECTION_PREFIX + self.contradicting_fact

    @property
    def distractors(self) -> tuple[int, ...]:
        """The indices of the facts the correction must leave alone."""
        return tuple(i for i in range(len(self.facts)) if i not in self.supporting)


def parse_cases(lines: Sequence[str]) -> list[LettaCase]:
    """Cases from the file's JSON lines (blank lines skipped, ids by line number)."""
    worlds: dict[tuple[str, ...], str] = {}
    found = []
    for number, line in enumerate(lines):
        if not line.strip():
            continue
        raw = json.loads(line)
        extra = raw["agent_args"]["extra"]
        facts = tuple(str(f) for f in extra["facts"])
        world = worlds.setdefault(facts, f"w{len(worlds):02d}")
        found.append(
            LettaCase(
                id=f"letta-{number:03d}",
                number=number,
                world=world,
                question=str(raw["input"]),
                answer=str(raw["ground_truth"]),
                facts=facts,
                contradicting_fact=str(extra["contradicting_fact"]),
                contradicting_answer=str(extra["contradicting_answer"]),
                supporting=tuple(int(i) for i in extra["supporting_fact_indices"]),
            )
        )
    return found


def load_cases(path: Path = DEFAULT_DATA) -> list[LettaCase]:
    if not path.exists():
        raise SystemExit(
            f"{path} is missing: the Letta dev set is read in place from the design notes' "
            "shared/data/ beside the repository (see its README)"
        )
    return parse_cases(path.read_text(encoding="utf-8").splitlines())


def problems(cases: Sequence[LettaCase]) -> list[str]:
    """What makes the cases unfit to score, one line each (empty: fit)."""
    found: list[str] = []
    for c in cases:
        if not c.facts or not all(f.strip() for f in c.facts):
            found.append(f"{c.id}: no facts, or an empty one")
        if not c.supporting or len(set(c.supporting)) != len(c.supporting):
            found.append(f"{c.id}: no supporting fact, or one repeated")
        if any(not 0 <= i < len(c.facts) for i in c.supporting):
            found.append(f"{c.id}: a supporting index outside the facts")
        if not c.contradicting_fact.strip() or not c.question.strip():
            found.append(f"{c.id}: an empty contradicting fact or question")
        if c.contradicting_fact in c.facts:
            found.append(f"{c.id}: the contradicting fact is one of the facts")
    return found


# --- the offline check of a matcher -------------------------------------------------------------

Matcher = Callable[[str, Sequence[str]], Collection[int]]
"""(the correction as said, the facts said before it, in order) -> the indices it replaces."""


def ledger_matcher(correction: str, facts: Sequence[str]) -> set[int]:
    """The shipped matcher as the ledger applies it to a spoken correction: each fact cut into
    claims, the correction's claims judged against them by the sentence model; a fact counts as
    picked when any of its claims is ended."""
    from tavern_ledger.domain.contradiction import Stated, contradicted, is_correction
    from tavern_ledger.domain.segments import FACTUAL, segments
    from tavern_ledger.embedding import shared_encoder

    stated = [
        Stated(f"{i}:{n}", s.text, str(i))
        for i, fact in enumerate(facts)
        for n, s in enumerate(segments(fact, is_correction(fact)))
        if s.kind in FACTUAL
    ]
    clauses = [s.text for s in segments(correction, True) if s.kind == "correction"]
    chosen, _ = contradicted(shared_encoder().embed, correction, clauses, stated)
    return {int(c.partition(":")[0]) for c in chosen}


@dataclass(frozen=True)
class Match:
    """What a matcher picked for one case."""

    case: LettaCase
    chosen: tuple[int, ...]

    @property
    def old_out(self) -> bool:
        """Every fact the correction replaces was picked."""
        return set(self.case.supporting) <= set(self.chosen)

    @property
    def lost(self) -> tuple[int, ...]:
        """Distractors picked: facts the correction would wrongly end."""
        return tuple(i for i in self.chosen if i not in self.case.supporting)

    @property
    def exact(self) -> bool:
        return set(self.chosen) == set(self.case.supporting)


def match(cases: Sequence[LettaCase], matcher: Matcher) -> list[Match]:
    return [Match(c, tuple(sorted(matcher(c.correction, c.facts)))) for c in cases]


@dataclass(frozen=True)
class Summary:
    cases: int
    old_out: float
    """% of cases whose replaced facts were all picked."""
    exact: float
    """% of cases where exactly the replaced facts were picked."""
    distractors_kept: float
    """% of distractor facts (over every case) not picked."""
    nothing_picked: int


def summary(matches: Sequence[Match]) -> Summary:
    distractors = sum(len(m.case.distractors) for m in matches)
    lost = sum(len(m.lost) for m in matches)
    return Summary(
        len(matches),
        _pct(sum(m.old_out for m in matches), len(matches)),
        _pct(sum(m.exact for m in matches), len(matches)),
        _pct(distractors - lost, distractors),
        sum(1 for m in matches if not m.chosen),
    )


def _pct(part: int, whole: int) -> float:
    return round(100 * part / whole, 1) if whole else 0.0


def explain(m: Match) -> str:
    """One line: the case, what was to be replaced, what was picked instead."""
    wanted = " ".join(f"f{i}" for i in m.case.supporting)
    picked = " ".join(f"f{i}" for i in m.chosen) or "none"
    return f"{m.case.id} {m.case.world}: replaces {wanted}, picked {picked} | {m.case.correction}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path, nargs="?", default=DEFAULT_DATA)
    parser.add_argument("--limit", type=int, default=0, help="only the first N cases")
    parser.add_argument("--verbose", action="store_true", help="every case not matched exactly")
    args = parser.parse_args(argv)
    cases = load_cases(args.data)
    cases = cases[: args.limit] if args.limit else cases
    unfit = problems(cases)
    if unfit:
        print("the cases are unfit:\n  " + "\n  ".join(unfit), file=sys.stderr)
        return 2
    matches = match(cases, ledger_matcher)
    s = summary(matches)
    print(
        f"{s.cases} cases, the shipped matcher offline: old fact picked {s.old_out:.1f}%, "
        f"exactly the old fact(s) {s.exact:.1f}%, distractors kept {s.distractors_kept:.1f}%, "
        f"nothing picked in {s.nothing_picked}"
    )
    if args.verbose:
        for m in matches:
            if not m.exact:
                print("  " + explain(m))
    return 0


if __name__ == "__main__":
    sys.exit(main())
