"""`bench.run` over the registry: a bench that fails is reported as failed and the run goes on,
and every registered bench runs at its tiny count on its every server kind."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest
import structlog

from bench import run as bench_run
from bench.registry import REGISTRY, Bench, Env, Result

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
TINY_RUN_TIMEOUT_S = 280


async def _publishes(env: Env, n: int) -> Result:
    nc = await nats.connect(env.nats_url)
    try:
        started = time.perf_counter()
        for _ in range(n):
            await nc.publish("bench.smoke", b"x")
        await nc.flush()
        return Result(n, time.perf_counter() - started)
    finally:
        await nc.close()


async def _breaks(env: Env, n: int) -> Result:
    raise RuntimeError("broken on purpose\nthe rest of the message")


def _registry() -> dict[str, Bench]:
    return {
        "smoke_raw": Bench("smoke_raw", _publishes, ("default",), 5, "a baseline"),
        "smoke_broken": Bench("smoke_broken", _breaks, ("default",), 5, "a figure", "smoke_raw"),
        "smoke_after": Bench("smoke_after", _publishes, ("default",), 5, "runs after it"),
    }


@pytest.fixture
def logging_kept() -> Iterator[None]:
    """`bench.run` configures logging for its process (loggers cached on first use); a run in
    this process must leave the harness's configuration as it found it."""
    saved = structlog.get_config()
    try:
        yield
    finally:
        structlog.configure(**saved)


@pytest.mark.usefixtures("logging_kept")
def test_a_failing_bench_is_reported_and_the_run_goes_on(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr(bench_run, "REGISTRY", _registry())
    out = tmp_path / "out.json"
    status = bench_run.main(["--repeat", "2", "--json", str(out)])
    printed = capsys.readouterr().out
    kept = re.search(r"kept the files of the failed bench in (\S+)", printed)
    assert kept is not None
    try:
        assert "RuntimeError: broken on purpose" in (Path(kept[1]) / "traceback.txt").read_text()
    finally:
        shutil.rmtree(kept[1], ignore_errors=True)
    assert status == 1
    failed_row = r"^smoke_broken@default +FAILED RuntimeError: broken on purpose$"
    assert re.search(failed_row, printed, re.MULTILINE)
    assert "the rest of the message" not in printed
    assert printed.count("smoke_broken@default") == 2  # its one failed run and its table row
    rows = {row["key"]: row for row in json.loads(out.read_text())["rows"]}
    assert rows["smoke_broken@default"]["error"] == "RuntimeError: broken on purpose"
    assert len(rows["smoke_after@default"]["rates"]) == 2  # measured both rounds, after it


@pytest.mark.slow
def test_every_registered_bench_runs_at_its_tiny_count(tmp_path: Path) -> None:
    out = tmp_path / "tiny.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAVERN_")}
    command = [sys.executable, "-m", "bench.run", "--tiny", "--repeat", "1", "--json", str(out)]
    done = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=TINY_RUN_TIMEOUT_S
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    rows = {row["key"]: row for row in json.loads(out.read_text())["rows"]}
    expected = {f"{bench.name}@{server}" for bench in REGISTRY.values() for server in bench.servers}
    assert set(rows) == expected
    assert all(row["n"] > 0 and row["rate_median"] > 0 for row in rows.values())
