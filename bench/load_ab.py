"""Versions of the services under the same load, interleaved, each on a fresh stack, so a noisy
shared machine loads them alike. Two versions that did the same work under the load (the loop
appended no atomic batch in either) once came out a quarter apart in p99, the same way in all
four rounds, run A then B each time: so the order turns around every round (A B, B A, ...).
Prints each run's rate, latency and per-turn cost, every figure's median with its ratio to the
first version's, and in how many rounds each version beat the first one's rate.

    git archive <commit> libs services | tar -x -C /tmp/a
    .venv/bin/python -m bench.load_ab --tree A=/tmp/a --tree B=. --rounds 3 --sessions 50

A version is a tree with `libs/*` and `services/*`: its packages go first on the services'
PYTHONPATH (ahead of the editable installs of the virtualenv). `--env KEY=VALUE` sets a
service setting for every version (say, a model that streams); `--set NAME:KEY=VALUE` for one,
so two settings of the same code compare as two versions:

    .venv/bin/python -m bench.load_ab --tree A=. --tree B=. --sessions 200 --turns 5 \
        --env TAVERN_LLM_OFFLINE_WORDS_PER_S=30 --set A:TAVERN_LOOP_CHUNK_INTERVAL_S=0.05
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

from bench.costsheet import enable_statement_stats
from bench.load import SHIPPED_LOGS, LoadReport, run_load
from tavern_runtime.logs import configure_logging
from tests.reliability.stack import Stack


def python_path(tree: Path) -> str:
    roots = sorted(str(p) for p in (*tree.glob("libs/*"), *tree.glob("services/*")) if p.is_dir())
    return os.pathsep.join(roots)


async def one(
    tree: Path, sessions: int, turns: int, env: dict[str, str] | None = None
) -> LoadReport:
    settings = {**SHIPPED_LOGS, **(env or {}), "PYTHONPATH": python_path(tree)}
    stack = Stack(proxied=False, env=settings)
    try:
        await enable_statement_stats(stack)
        await stack.start()
        return await run_load(stack, sessions, turns)
    finally:
        await stack.close()
        stack.remove()


def figures(report: LoadReport) -> dict[str, float]:
    cost = report.cost
    found = {
        "turns/s": report.turns_per_s,
        "p50 ms": report.percentile(50),
        "p99 ms": report.percentile(99),
        "cpu ms/turn all": cost.cpu_total_ms,
    }
    found |= {f"cpu ms/turn {k}": v for k, v in cost.cpu_ms.items()}
    found["cpu ms/turn all + caught up"] = cost.cpu_total_ms + cost.catch_up_total_ms
    found |= {f"cpu ms/turn {k} caught up": v for k, v in cost.catch_up_ms.items()}
    found |= {f"pg {k}/turn": v for k, v in cost.database.items()}
    found |= {f"statements/turn {k}": v for k, v in (cost.statements or {}).items()}
    found |= {f"machine {k} %": v * 100 for k, v in cost.machine.items()}
    found |= {f"stream {k} msgs/turn": msgs for k, (msgs, _) in cost.streams.items()}
    found["lost+doubled"] = len(report.lost) + len(report.doubled) + len(report.problems)
    return found


def process_table(sheet: list[str]) -> list[str]:
    """The cost sheet's head, up to its first blank line: CPU per process and the machine."""
    return list(itertools.takewhile(bool, sheet))


def order(names: list[str], round_: int) -> list[str]:
    """The versions in the order round `round_` (1-based) runs them: reversed every other round."""
    return list(names) if round_ % 2 else list(reversed(names))


def wins(runs: dict[str, list[dict[str, float]]], key: str = "turns/s") -> list[str]:
    """For each version after the first: in how many rounds its `key` beat the first's."""
    names = list(runs)
    first = runs[names[0]]
    out = []
    for name in names[1:]:
        pairs = list(zip(first, runs[name], strict=False))
        won = sum(1 for a, b in pairs if b.get(key, 0.0) > a.get(key, 0.0))
        out.append(f"{name} beat {names[0]} on {key} in {won} of {len(pairs)} rounds")
    return out


def summary(runs: dict[str, list[dict[str, float]]]) -> list[str]:
    """Each figure's median per version, and its ratio to the first version's."""
    names = list(runs)
    keys = sorted({k for per in runs.values() for run in per for k in run})
    out = [f"{'figure':34} " + " ".join(f"{n:>10} {'/' + names[0]:>6}" for n in names)]
    for key in keys:
        medians = [statistics.median(r.get(key, 0.0) for r in runs[n]) for n in names]
        first = medians[0]
        cells = [f"{m:>10.2f} {m / first if first else float('nan'):>6.2f}" for m in medians]
        out.append(f"{key:34} " + " ".join(cells))
    return out


def version_envs(
    names: list[str], common: list[str], per_version: list[str]
) -> dict[str, dict[str, str]]:
    """The services' extra settings of each version: `common` (KEY=VALUE) for all, then
    `per_version` (NAME:KEY=VALUE) for the one it names."""
    envs = {name: dict(pair(item) for item in common) for name in names}
    for item in per_version:
        name, _, setting = item.partition(":")
        if name not in envs:
            raise SystemExit(f"--set {item!r}: no version named {name!r}")
        key, value = pair(setting)
        envs[name][key] = value
    return envs


def pair(item: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key.startswith("TAVERN_"):
        raise SystemExit(f"{item!r}: expected TAVERN_KEY=VALUE")
    return key, value


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", required=True, metavar="NAME=PATH")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--set", action="append", default=[], metavar="NAME:KEY=VALUE")
    args = parser.parse_args(argv)
    configure_logging("bench", level="WARNING")
    trees = {name: Path(path) for name, _, path in (t.partition("=") for t in args.tree)}
    envs = version_envs(list(trees), args.env, args.set)
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    sheets: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    for round_ in range(1, args.rounds + 1):
        for name in order(list(trees), round_):
            report = await one(trees[name].resolve(), args.sessions, args.turns, envs[name])
            runs[name].append(figures(report))
            sheets[name].append(report.cost.as_json())
            print(f"round {round_} {name}: " + "; ".join(report.lines()[:2]), flush=True)
            print("\n".join(process_table(report.cost.lines())), flush=True)
    print("\n".join([*summary(runs), *wins(runs)]))
    if args.json:
        args.json.write_text(json.dumps({"runs": runs, "sheets": sheets}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
