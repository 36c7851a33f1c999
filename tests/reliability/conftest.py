"""The reliability suite's harness: a shared stack of real processes, and the summary tables
every test adds to, printed at the end of the run whatever `-s` says."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.reliability.report import REPORT
from tests.reliability.stack import Stack, running_stack


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not REPORT.sections:
        return
    terminalreporter.section("reliability summary")
    for line in REPORT.lines():
        terminalreporter.write_line(line)


@pytest.fixture(scope="session")
async def stack() -> AsyncIterator[Stack]:
    """Every service as its own process behind a cuttable proxy, shared by the tests that
    leave the system running (poison, hostile, scopes, load, shutdown)."""
    async with running_stack() as system:
        yield system
