"""Two versions of the services under the same load, interleaved: A, B, A, B, ... each on a
fresh stack, so a noisy shared machine loads both alike. Prints each run's rate, latency and
per-turn cost, and the B/A ratio of every figure's median.

    git archive <commit> libs services | tar -x -C /tmp/a
    .venv/bin/python -m bench.load_ab --a /tmp/a --b . --rounds 3 --sessions 50 --turns 8

A version is a tree with `libs/*` and `services/*`: its packages go first on the services'
PYTHONPATH (ahead of the editable installs of the virtualenv).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

from bench.costsheet import enable_statement_stats
from bench.load import LoadReport, run_load
from tavern_runtime.logs import configure_logging
from tests.reliability.stack import Stack


def python_path(tree: Path) -> str:
    roots = sorted(str(p) for p in (*tree.glob("libs/*"), *tree.glob("services/*")) if p.is_dir())
    return os.pathsep.join(roots)


async def one(tree: Path, sessions: int, turns: int) -> LoadReport:
    stack = Stack(proxied=False, env={"TAVERN_LOG_LEVEL": "ERROR", "PYTHONPATH": python_path(tree)})
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
    found |= {f"pg {k}/turn": v for k, v in cost.database.items()}
    found |= {f"statements/turn {k}": v for k, v in (cost.statements or {}).items()}
    found["lost+doubled"] = len(report.lost) + len(report.doubled) + len(report.problems)
    return found


def summary(runs: dict[str, list[dict[str, float]]]) -> list[str]:
    keys = sorted({k for per in runs.values() for run in per for k in run})
    out = [f"{'figure':34} {'A median':>10} {'B median':>10} {'B/A':>6}"]
    for key in keys:
        a = statistics.median(r.get(key, 0.0) for r in runs["A"])
        b = statistics.median(r.get(key, 0.0) for r in runs["B"])
        out.append(f"{key:34} {a:>10.2f} {b:>10.2f} {b / a if a else float('nan'):>6.2f}")
    return out


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", type=Path, required=True)
    parser.add_argument("--b", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    configure_logging("bench", level="WARNING")
    runs: dict[str, list[dict[str, float]]] = {"A": [], "B": []}
    sheets: dict[str, list[dict[str, Any]]] = {"A": [], "B": []}
    for round_ in range(1, args.rounds + 1):
        for name, tree in (("A", args.a), ("B", args.b)):
            report = await one(tree.resolve(), args.sessions, args.turns)
            runs[name].append(figures(report))
            sheets[name].append(report.cost.as_json())
            print(f"round {round_} {name}: " + "; ".join(report.lines()[:2]), flush=True)
            print("\n".join(report.cost.lines()[:12]), flush=True)
    print("\n".join(summary(runs)))
    if args.json:
        args.json.write_text(json.dumps({"runs": runs, "sheets": sheets}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
