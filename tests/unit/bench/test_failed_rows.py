"""A failed row is one line of the table with its error; no ratio is made of it, nor of a figure
measured against it; a smoke run takes each bench's tiny count."""

from __future__ import annotations

from bench.registry import TINY, Bench, Env, Result, Row
from bench.run import counts, one_line, ratio, table


async def _never(env: Env, n: int) -> Result:
    raise AssertionError("not measured here")


BASE = Bench("b", _never, ("default",), 3000, "a baseline")
FIGURE = Bench("f", _never, ("default",), 600, "a figure", "b", tiny_count=40)


def test_a_failed_row_shows_its_error_in_one_line() -> None:
    failed = Row(FIGURE, "default", error=one_line(RuntimeError("no auth key: set it\ndetail")))
    lines = table([Row(BASE, "default", [Result(10, 1.0)]), failed]).splitlines()
    assert " ".join(lines[-1].split()) == "f@default FAILED RuntimeError: no auth key: set it"


def test_no_ratio_is_made_against_a_failed_baseline() -> None:
    base = Row(BASE, "default", error="TimeoutError")
    figure = Row(FIGURE, "default", [Result(10, 1.0)])
    assert ratio(figure, {base.key: base, figure.key: figure}) is None
    assert "x b@default" not in table([base, figure])


def test_an_error_without_a_message_is_named_by_its_type() -> None:
    assert one_line(TimeoutError()) == "TimeoutError"


def test_a_smoke_run_takes_each_benchs_tiny_count() -> None:
    assert counts([BASE, FIGURE], 1.0, [], tiny=True) == {"b": TINY, "f": 40}
    assert counts([BASE, FIGURE], 1.0, ["f=7"], tiny=True) == {"b": TINY, "f": 7}
    assert counts([BASE, FIGURE], 0.5, []) == {"b": 1500, "f": 300}
