"""Background services lower their own scheduling priority at start; a process is never made
less nice than it was started (that would need a privilege)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tavern_consolidator.config import ConsolidatorSettings
from tavern_ledger.config import LedgerSettings
from tavern_loop.config import LoopSettings
from tavern_projector.config import ProjectorSettings


def _niceness_after(started_at: int, asked: int) -> int:
    """The niceness of a fresh process started at `started_at` that asks for `asked`."""
    code = (
        "import os; from tavern_runtime.service import yield_cpu; "
        f"yield_cpu({asked}); print(os.getpriority(os.PRIO_PROCESS, 0))"
    )
    command = [sys.executable, "-c", code]
    if started_at:
        command = ["nice", "-n", str(started_at), *command]
    done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=60)
    return int(done.stdout.strip().splitlines()[-1])  # after the log line


@pytest.mark.parametrize(
    ("started_at", "asked", "runs_at"),
    [(0, 0, 0), (0, 10, 10), (0, 19, 19), (12, 10, 12), (5, 10, 10)],
)
def test_a_process_lowers_its_priority_to_what_it_asks_never_raises_it(
    started_at: int, asked: int, runs_at: int
) -> None:
    assert _niceness_after(started_at, asked) == runs_at


def test_the_read_models_and_consolidation_yield_to_the_turns_by_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key in ("TAVERN_PROJECTOR_NICE", "TAVERN_CONSOLIDATOR_NICE"):
        monkeypatch.delenv(key, raising=False)
    assert ProjectorSettings().niceness == 10
    assert ConsolidatorSettings().niceness == 10
    assert LoopSettings().niceness == 0
    assert LedgerSettings().niceness == 0


def test_an_operator_can_run_a_background_service_at_normal_priority(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TAVERN_PROJECTOR_NICE", "0")
    monkeypatch.setenv("TAVERN_CONSOLIDATOR_NICE", "0")
    assert ProjectorSettings().niceness == 0
    assert ConsolidatorSettings().niceness == 0
