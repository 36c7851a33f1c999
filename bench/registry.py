"""The bench registry: raw baselines and project figures, each figure paired with a baseline.

A later issue adds a figure with `@figure(..., baseline="publish_awaited")`; the runner measures
both in the same run, on the same kind of fresh server, and prints the ratio.
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

Server = Literal["fsync", "default", "cluster", "postgres"]
"""`fsync`: nats-server with `sync_interval: always`; `default`: fsync every 2 min; `cluster`:
three such fsyncing servers on this machine, streams R3 (bench/cluster.py)."""


@dataclass(frozen=True)
class Env:
    """What one measurement runs against: a fresh nats-server, or the run's PostgreSQL."""

    server: Server
    nats_url: str = ""
    database_url: str = ""
    files: Path | None = None
    """The measurement's directory, kept when it fails: a bench puts its own files there."""
    tiny: bool = False
    """A smoke run (`--tiny`): a bench with a fixed-size corpus or fleet makes it small too."""

    def directory(self, name: str) -> Path:
        """A directory of the bench's own, in the measurement's (a fresh one without it)."""
        if self.files is None:
            return Path(tempfile.mkdtemp(prefix=f"tavern-bench-{name}-"))
        path = self.files / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    @property
    def replicas(self) -> int:
        """Replicas of the streams a bench creates on this server."""
        return 3 if self.server == "cluster" else 1


@dataclass(frozen=True)
class Result:
    """`count` operations in `seconds`; latencies (ms) when the bench measures each one."""

    count: int
    seconds: float
    latencies_ms: tuple[float, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)
    """Whatever else the bench measured (the load's cost sheet), kept in the JSON output."""

    @property
    def rate(self) -> float:
        return self.count / self.seconds if self.seconds else 0.0

    def percentile(self, p: float) -> float | None:
        if not self.latencies_ms:
            return None
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


Measure = Callable[[Env, int], Coroutine[Any, Any, Result]]


@dataclass(frozen=True)
class Limits:
    """Absolute goals of a figure, judged on the median of its runs."""

    p50_ms: float | None = None
    p99_ms: float | None = None
    rate: float | None = None
    """Least operations per second."""

    def verdicts(self, p50: float | None, p99: float | None, rate: float) -> list[str]:
        found: list[str] = []
        if self.p50_ms is not None and p50 is not None:
            found.append(f"p50 ≤{self.p50_ms:g} ms {_met(p50 <= self.p50_ms)}")
        if self.p99_ms is not None and p99 is not None:
            found.append(f"p99 ≤{self.p99_ms:g} ms {_met(p99 <= self.p99_ms)}")
        if self.rate is not None:
            found.append(f"≥{self.rate:,.0f}/s {_met(rate >= self.rate)}")
        return found


TINY = 10
"""A bench's count in a smoke run (`--tiny`) unless it names its own."""


def _met(held: bool) -> str:
    return "met" if held else "MISSED"


@dataclass(frozen=True)
class Bench:
    name: str
    measure: Measure
    servers: tuple[Server, ...]
    count: int
    description: str
    baseline: str | None = None  # figures only: the raw bench they are compared with
    goal: float | None = None  # figures only: minimum rate ratio against the baseline
    limits: Limits | None = None  # figures only: absolute goals (latency ceilings, rate floor)
    tiny_count: int | None = None  # the count of a smoke run, when `TINY` does not suit

    @property
    def tiny(self) -> int:
        """The count of a smoke run (`--tiny`): enough to run every path of the bench once."""
        return self.tiny_count or min(self.count, TINY)

    @property
    def is_figure(self) -> bool:
        return self.baseline is not None


@dataclass
class Row:
    """The runs of one bench on one server, summarised by their median."""

    bench: Bench
    server: Server
    results: list[Result] = field(default_factory=list)
    error: str | None = None
    """Why a run of the row failed (one line); the row is not measured again."""

    @property
    def key(self) -> str:
        return f"{self.bench.name}@{self.server}"

    @property
    def rate(self) -> float:
        return statistics.median(r.rate for r in self.results)

    def percentile(self, p: float) -> float | None:
        values = [v for r in self.results if (v := r.percentile(p)) is not None]
        return statistics.median(values) if values else None


REGISTRY: dict[str, Bench] = {}


def _register(bench: Bench) -> None:
    if bench.name in REGISTRY:
        raise ValueError(f"bench {bench.name} registered twice")
    REGISTRY[bench.name] = bench


def baseline(
    name: str,
    *,
    servers: tuple[Server, ...],
    count: int,
    description: str,
    tiny: int | None = None,
) -> Callable[[Measure], Measure]:
    """Register a raw measurement (plain nats-py or asyncpg) that figures compare against."""

    def register(measure: Measure) -> Measure:
        _register(Bench(name, measure, servers, count, description, tiny_count=tiny))
        return measure

    return register


def figure(
    name: str,
    *,
    baseline: str,
    servers: tuple[Server, ...],
    count: int,
    description: str,
    goal: float | None = None,
    limits: Limits | None = None,
    tiny: int | None = None,
) -> Callable[[Measure], Measure]:
    """Register a project figure, reported as a ratio of `baseline` on the same server kind."""

    def register(measure: Measure) -> Measure:
        bench = Bench(name, measure, servers, count, description, baseline, goal, limits, tiny)
        _register(bench)
        return measure

    return register
