"""The background worker's scheduler: wakes of one scope that come close together run its job
once; every woken scope still runs."""

from __future__ import annotations

import asyncio

from tavern_consolidator.scheduler import Scheduler
from tests.support import eventually


async def _nothing_to_sweep(everything: bool) -> list[str]:
    return []


async def _run_until(ran: list[tuple[str, str]], count: int, scheduler: Scheduler) -> None:
    scheduler.start()
    try:
        await eventually(lambda: len(ran) >= count, timeout=10)
        await asyncio.sleep(0.2)  # a second run of the same scope would show up here
    finally:
        await scheduler.stop(1.0)


async def test_wakes_within_the_coalescing_window_run_the_job_once() -> None:
    ran: list[tuple[str, str]] = []

    async def distil(scope: str) -> None:
        ran.append(("distil", scope))

    scheduler = Scheduler({"distil": distil}, _nothing_to_sweep, poll_s=60, coalesce_s=0.1)
    scheduler.wake("distil", ["a", "b"])
    scheduler.wake("distil", ["a"])  # the turn's end, after its evidence
    scheduler.wake("distil", ["b", "a"])

    await _run_until(ran, 2, scheduler)

    assert ran == [("distil", "a"), ("distil", "b")]


async def test_a_wake_after_the_job_ran_runs_it_again() -> None:
    ran: list[tuple[str, str]] = []
    scheduler: Scheduler

    async def distil(scope: str) -> None:
        ran.append(("distil", scope))
        if len(ran) == 1:
            scheduler.wake("distil", [scope])  # more backlog: the job asks to run again

    scheduler = Scheduler({"distil": distil}, _nothing_to_sweep, poll_s=60, coalesce_s=0.05)
    scheduler.wake("distil", ["a"])

    await _run_until(ran, 2, scheduler)

    assert ran == [("distil", "a"), ("distil", "a")]


async def test_without_coalescing_a_woken_job_runs_at_once_in_wake_order() -> None:
    ran: list[tuple[str, str]] = []

    async def job(scope: str) -> None:
        ran.append(("rules", scope))

    scheduler = Scheduler({"rules": job}, _nothing_to_sweep, poll_s=60)
    scheduler.wake("rules", ["x", "y", "x"])

    await _run_until(ran, 2, scheduler)

    assert ran == [("rules", "x"), ("rules", "y")]
