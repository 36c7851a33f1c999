"""Restart backoff and output prefixes of `tavern up`'s service processes."""

from __future__ import annotations

import io

from tavern_cli.supervisor import (
    FIRST_DELAY_S,
    MAX_DELAY_S,
    STABLE_AFTER_S,
    Printer,
    next_delay,
    prefix,
)


def test_first_restart_waits_the_first_delay() -> None:
    assert next_delay(0, ran_for_s=0.1) == FIRST_DELAY_S


def test_quick_crashes_double_the_delay_up_to_the_cap() -> None:
    delays = [FIRST_DELAY_S]
    for _ in range(10):
        delays.append(next_delay(delays[-1], ran_for_s=0.5))
    assert delays[:4] == [1, 2, 4, 8]
    assert max(delays) == MAX_DELAY_S


def test_a_stable_run_resets_the_delay() -> None:
    assert next_delay(MAX_DELAY_S, ran_for_s=STABLE_AFTER_S) == FIRST_DELAY_S


def test_prefix_is_coloured_on_a_terminal_and_plain_otherwise() -> None:
    assert prefix("loop", "36", 12, tty=True) == "\x1b[36m[loop]\x1b[0m" + " " * 8 + " "
    assert prefix("loop", "36", 12, tty=False) == "[loop]" + " " * 8 + " "


def test_prefixes_align_service_output() -> None:
    out = io.StringIO()
    printer = Printer(out, width=12)
    printer.line("loop", "36", "started")
    printer.line("consolidator", "33", "started")
    starts = [line.index("started") for line in out.getvalue().splitlines()]
    assert starts[0] == starts[1]
