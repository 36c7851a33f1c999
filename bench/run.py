"""Run the benches: raw baselines and project figures side by side, with their ratios.

    .venv/bin/python -m bench.run [--repeat 3] [--scale 1.0] [--only a,b] [--json out.json]
    .venv/bin/python -m bench.run --tiny --repeat 1      # every bench once, at its tiny count

Every measurement gets a fresh nats-server (file store, `sync_interval: always` or the default);
PostgreSQL is started once per run. Runs go round-robin and each row reports the median. A bench
that fails is reported as failed (its error in the table, its files and traceback kept) and the
run goes on; the exit status is the number of rows that failed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __name__ == "__main__" and not __package__:  # `python bench/run.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import (  # noqa: F401 - importing registers benches
    baselines,
    consolidator_figures,
    figures,
    gateway_figures,
    ledger,
    load,
    loop_figures,
    projector_figures,
    st_figures,
)
from bench.cluster import Cluster
from bench.registry import REGISTRY, Bench, Env, Result, Row, Server
from tavern_runtime.embedded import EmbeddedNats, EmbeddedPostgres
from tavern_runtime.logs import configure_logging


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per bench (median reported)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every bench's count")
    parser.add_argument("--only", default="", help="bench names, comma-separated")
    parser.add_argument("--count", action="append", default=[], metavar="NAME=N")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    parser.add_argument("--list", action="store_true", help="list the benches and exit")
    parser.add_argument(
        "--tiny",
        action="store_true",
        default=os.environ.get("TAVERN_BENCH_TINY", "") not in ("", "0"),
        help="every bench at its tiny count, to see that it runs (TAVERN_BENCH_TINY=1)",
    )
    return parser.parse_args(argv)


def selected(only: str) -> list[Bench]:
    if not only:
        return list(REGISTRY.values())
    names = {name.strip() for name in only.split(",") if name.strip()}
    unknown = names - REGISTRY.keys()
    if unknown:
        raise SystemExit(f"unknown bench: {', '.join(sorted(unknown))}")
    names |= {base for n in names if (base := REGISTRY[n].baseline)}  # figures need theirs
    return [bench for name, bench in REGISTRY.items() if name in names]


def counts(
    benches: list[Bench], scale: float, overrides: list[str], tiny: bool = False
) -> dict[str, int]:
    result = {b.name: b.tiny if tiny else max(1, int(b.count * scale)) for b in benches}
    for item in overrides:
        name, _, value = item.partition("=")
        result[name] = int(value)
    return result


@contextlib.contextmanager
def workdir(name: str) -> Iterator[Path]:
    """A directory for one measurement's files (servers' stores and logs, the bench's own):
    removed when the measurement succeeds, kept with `traceback.txt` when it fails."""
    root = Path(tempfile.mkdtemp(prefix=f"tavern-bench-{name}-"))
    try:
        yield root
    except Exception:
        (root / "traceback.txt").write_text(traceback.format_exc())
        print(f"  kept the files of the failed bench in {root}", flush=True)
        raise
    shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def nats_server(server: Server, root: Path) -> Iterator[str]:
    """A fresh nats-server (three for `cluster`) with its store and log in `root`."""
    embedded: EmbeddedNats | Cluster
    if server == "cluster":
        embedded = Cluster(root / "cluster")
    else:
        embedded = EmbeddedNats(root / "nats", sync_always=server == "fsync")
    embedded.start()
    try:
        yield embedded.url
    finally:
        embedded.stop()


@dataclass
class Postgres:
    """The run's PostgreSQL: its files are kept when a bench failed on it."""

    dsn: str
    root: Path
    keep: bool = False


@contextlib.contextmanager
def postgres_server() -> Iterator[Postgres]:
    found = Postgres("", Path(tempfile.mkdtemp(prefix="tavern-bench-pg-")))
    embedded = EmbeddedPostgres(found.root)
    embedded.start()
    found.dsn = embedded.dsn
    try:
        yield found
    finally:
        embedded.stop()
        if found.keep:
            print(f"  kept the PostgreSQL files of the run in {found.root}", flush=True)
        else:
            shutil.rmtree(found.root, ignore_errors=True)


def measure(bench: Bench, server: Server, n: int, database_url: str, tiny: bool = False) -> Result:
    with workdir(f"{bench.name}-{server}") as root:
        if server == "postgres":
            env = Env(server, database_url=database_url, files=root, tiny=tiny)
            return asyncio.run(bench.measure(env, n))
        with nats_server(server, root) as url:
            env = Env(server, nats_url=url, files=root, tiny=tiny)
            return asyncio.run(bench.measure(env, n))


def one_line(exc: BaseException) -> str:
    """An error as the table shows it: its type and the first line of its message."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def paired_order(benches: list[Bench]) -> list[Row]:
    """Every figure right after its baseline on the same server: the pair shares the load."""
    rows = [Row(b, s) for b in benches for s in b.servers]
    ordered = [row for row in rows if not row.bench.is_figure]
    for row in (r for r in rows if r.bench.is_figure):
        base = next((i for i, b in enumerate(ordered) if _pairs(b, row)), len(ordered) - 1)
        while base + 1 < len(ordered) and ordered[base + 1].bench.is_figure:
            base += 1
        ordered.insert(base + 1, row)
    return ordered


def _pairs(base: Row, figure_row: Row) -> bool:
    return base.bench.name == figure_row.bench.baseline and base.server == figure_row.server


def run(benches: list[Bench], repeat: int, sizes: dict[str, int], tiny: bool = False) -> list[Row]:
    """Measure every row `repeat` times, round-robin; a row that fails is not measured again
    and the run goes on."""
    rows = paired_order(benches)
    needs_pg = any(row.server == "postgres" for row in rows)
    with postgres_server() if needs_pg else contextlib.nullcontext(None) as pg:
        for attempt in range(1, repeat + 1):
            for row in (r for r in rows if r.error is None):
                _attempt(row, f"run {attempt}/{repeat}", sizes[row.bench.name], pg, tiny)
    return rows


def _attempt(row: Row, label: str, n: int, pg: Postgres | None, tiny: bool) -> None:
    started = time.monotonic()
    try:
        result = measure(row.bench, row.server, n, pg.dsn if pg else "", tiny)
    except Exception as exc:  # any failure of a bench is its row's, not the run's
        row.error = one_line(exc)
        if pg is not None and row.server == "postgres":
            pg.keep = True
        print(f"  {label} {row.key:32} FAILED {row.error}", flush=True)
        return
    row.results.append(result)
    took = time.monotonic() - started  # servers, seeding and all: what the run spent on it
    print(f"  {label} {row.key:32} {result.rate:>12,.0f}/s  ({took:.1f} s)", flush=True)


def ratio(row: Row, by_key: dict[str, Row]) -> tuple[float, str] | None:
    """Median of the per-round ratios: each round ran the figure right after its baseline."""
    base = by_key.get(f"{row.bench.baseline}@{row.server}") if row.bench.baseline else None
    if base is None or row.error or base.error:
        return None
    pairs = zip(row.results, base.results, strict=True)
    return statistics.median(f.rate / b.rate for f, b in pairs if b.rate), base.key


def verdict(row: Row, found: tuple[float, str] | None) -> str:
    """Each goal of the row and whether its median run meets it."""
    verdicts: list[str] = []
    if row.bench.goal is not None and found is not None:
        held = found[0] >= row.bench.goal
        verdicts.append(f"goal ≥{row.bench.goal:.2f} {'met' if held else 'MISSED'}")
    if row.bench.limits is not None:
        verdicts += row.bench.limits.verdicts(row.percentile(50), row.percentile(99), row.rate)
    return ", ".join(verdicts)


def table(rows: list[Row]) -> str:
    by_key = {row.key: row for row in rows}
    header = f"{'bench':32} {'n':>7} {'median/s':>12} {'p50 ms':>8} {'p99 ms':>8}  vs baseline"
    lines = [header, "-" * len(header)]
    for row in rows:
        if row.error is not None:
            lines.append(f"{row.key:32} FAILED {row.error}")
            continue
        found = ratio(row, by_key)
        versus = f"{found[0]:.2f}x {found[1]}  {verdict(row, found)}" if found else ""
        lines.append(
            f"{row.key:32} {row.results[0].count:>7} {row.rate:>12,.0f} "
            f"{_ms(row.percentile(50)):>8} {_ms(row.percentile(99)):>8}  {versus}"
        )
    return "\n".join(lines)


def _ms(value: float | None) -> str:
    return f"{value:.3f}" if value is not None else ""


def as_json(rows: list[Row], started: float) -> dict[str, Any]:
    by_key = {row.key: row for row in rows}
    meta = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "seconds": round(time.time() - started, 1),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }
    return {"meta": meta, "rows": [_row_json(row, by_key) for row in rows]}


def _row_json(row: Row, by_key: dict[str, Row]) -> dict[str, Any]:
    if row.error is not None:
        return {"key": row.key, "description": row.bench.description, "error": row.error}
    found = ratio(row, by_key)
    return {
        "key": row.key,
        "description": row.bench.description,
        "n": row.results[0].count,
        "rate_median": round(row.rate, 1),
        "rates": [round(r.rate, 1) for r in row.results],
        "p50_ms": row.percentile(50),
        "p99_ms": row.percentile(99),
        "baseline": found[1] if found else None,
        "ratio": round(found[0], 3) if found else None,
        "goal": row.bench.goal,
        "verdict": verdict(row, found) or None,
        "extra": [r.extra for r in row.results if r.extra],
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    benches = selected(args.only)
    if args.list:
        for bench in benches:
            print(f"{bench.name:24} {','.join(bench.servers):16} {bench.description}")
        return 0
    configure_logging("bench", level="WARNING")  # as in production: no per-append lines
    started = time.time()
    sizes = counts(benches, args.scale, args.count, args.tiny)
    rows = run(benches, args.repeat, sizes, args.tiny)
    print()
    print(table(rows))
    failed = sum(row.error is not None for row in rows)
    print(f"\n{time.time() - started:.0f} s, {os.cpu_count()} cpus, {failed} failed")
    if args.json:
        args.json.write_text(json.dumps(as_json(rows, started), indent=1))
    return min(failed, 125)  # the exit status: how many rows failed


if __name__ == "__main__":
    sys.exit(main())
