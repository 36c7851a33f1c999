from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tavern_loop.tools import ToolContext, ToolLimits, ToolOutput, ToolPipeline, ToolRegistry
from tests.support import eventually
from tests.unit.loop.tools.recording import Recorder, call, echo, tool


async def test_results_commit_in_model_order_when_parallel_calls_finish_in_reverse() -> None:
    finished: dict[str, asyncio.Event] = {k: asyncio.Event() for k in "abc"}
    completion: list[str] = []
    after = {"a": "b", "b": "c", "c": None}

    async def handle(args: Any, ctx: ToolContext) -> ToolOutput:
        wait_for = after[args["k"]]
        if wait_for:
            await finished[wait_for].wait()
        completion.append(args["k"])
        finished[args["k"]].set()
        return ToolOutput(f"result {args['k']}")

    pipeline = ToolPipeline(ToolRegistry([tool("t", handle, parallel_safe=True)]))
    rec = Recorder()
    calls = [call(k, "t", f'{{"k": "{k}"}}') for k in "abc"]

    outcomes = await rec.run(pipeline, *calls)

    assert completion == ["c", "b", "a"]
    assert [o.call_id for o in outcomes] == ["a", "b", "c"]
    assert [o.content for o in outcomes] == ["result a", "result b", "result c"]
    assert rec.log == [("call", "a"), ("call", "b"), ("call", "c")] + [("result", k) for k in "abc"]


async def test_at_most_ten_parallel_calls_run_at_once_in_a_rolling_pool() -> None:
    release = asyncio.Event()
    active = 0
    peak = 0

    async def handle(args: Any, ctx: ToolContext) -> ToolOutput:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await release.wait()
        active -= 1
        return ToolOutput("ok")

    pipeline = ToolPipeline(ToolRegistry([tool("t", handle, parallel_safe=True)]))
    rec = Recorder()
    running = asyncio.create_task(rec.run(pipeline, *[call(f"c{i}", "t") for i in range(25)]))

    await eventually(lambda: active == 10)
    assert len(rec.started) == 10
    release.set()
    outcomes = await running

    assert peak == 10
    assert [o.call_id for o in outcomes] == [f"c{i}" for i in range(25)]
    assert all(o.ok for o in outcomes)


async def test_exclusive_call_runs_alone_between_parallel_ones() -> None:
    timeline: list[tuple[str, str]] = []

    async def handle(args: Any, ctx: ToolContext) -> ToolOutput:
        timeline.append(("start", ctx.call_id))
        await asyncio.sleep(0.01)
        timeline.append(("end", ctx.call_id))
        return ToolOutput("ok")

    registry = ToolRegistry(
        [tool("p", handle, parallel_safe=True), tool("x", handle, parallel_safe=False)]
    )
    rec = Recorder()

    await rec.run(
        ToolPipeline(registry), call("p1", "p"), call("p2", "p"), call("x", "x"), call("p3", "p")
    )

    assert timeline[:2] == [("start", "p1"), ("start", "p2")]
    x_start = timeline.index(("start", "x"))
    assert {("end", "p1"), ("end", "p2")} <= set(timeline[:x_start])
    assert timeline[x_start + 1] == ("end", "x")
    assert timeline[x_start + 2] == ("start", "p3")


async def test_cancel_lets_started_calls_finish_and_aborts_unstarted_ones() -> None:
    gate = asyncio.Event()
    entered = asyncio.Event()

    async def slow(args: Any, ctx: ToolContext) -> ToolOutput:
        entered.set()
        await gate.wait()
        return ToolOutput("finished anyway")

    registry = ToolRegistry([tool("slow", slow, parallel_safe=True), tool("x", echo())])
    rec = Recorder()
    running = asyncio.create_task(
        rec.run(ToolPipeline(registry), call("a", "slow"), call("b", "x"), call("c", "slow"))
    )
    await entered.wait()
    rec.cancelled.set()
    gate.set()
    outcomes = await running

    assert outcomes[0].ok
    assert outcomes[0].content == "finished anyway"
    for outcome in outcomes[1:]:
        assert outcome.content == "Error: tool call aborted before dispatch"
        assert outcome.error is not None
        assert outcome.error.code == "ABORTED_BEFORE_DISPATCH"
        assert outcome.synthetic
    assert rec.log == [
        ("call", "a"),
        ("result", "a"),
        ("call", "b"),
        ("result", "b"),
        ("call", "c"),
        ("result", "c"),
    ]


async def test_cancel_aborts_a_started_call_that_outlives_the_grace() -> None:
    async def stuck(args: Any, ctx: ToolContext) -> ToolOutput:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    limits = ToolLimits(cancel_grace_s=0.01)
    pipeline = ToolPipeline(ToolRegistry([tool("stuck", stuck)]), limits)
    rec = Recorder()
    running = asyncio.create_task(rec.run(pipeline, call("a", "stuck")))
    await eventually(lambda: rec.started)
    rec.cancelled.set()
    [outcome] = await running

    assert outcome.error is not None
    assert outcome.error.code == "ABORTED"
    assert outcome.content == "Error: tool call aborted"
    assert not outcome.synthetic


async def test_a_turn_cancelled_before_the_run_starts_nothing() -> None:
    ran: list[str] = []

    async def handle(args: Any, ctx: ToolContext) -> ToolOutput:
        ran.append(ctx.call_id)
        return ToolOutput("ok")

    rec = Recorder()
    rec.cancelled.set()
    outcomes = await rec.run(
        ToolPipeline(ToolRegistry([tool("t", handle)])), call("a", "t"), call("b", "t")
    )

    assert ran == []
    assert [o.synthetic for o in outcomes] == [True, True]
    assert [c.call_id for c in rec.started] == ["a", "b"]


async def test_the_context_carries_the_binding_and_the_cancel_event() -> None:
    seen: list[ToolContext] = []

    async def handle(args: Any, ctx: ToolContext) -> ToolOutput:
        seen.append(ctx)
        return ToolOutput("ok")

    rec = Recorder()
    await rec.run(
        ToolPipeline(ToolRegistry([tool("t", handle)])), call("a", "t", '{"session_id": "x"}')
    )

    assert seen[0].session_id == "s1"
    assert seen[0].binding == {"scope": "test"}
    assert seen[0].cancelled is rec.cancelled


async def test_cancelling_the_run_itself_cancels_its_tool_tasks() -> None:
    stopped = asyncio.Event()

    async def stuck(args: Any, ctx: ToolContext) -> ToolOutput:
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()
        raise AssertionError("unreachable")

    rec = Recorder()
    running = asyncio.create_task(
        rec.run(ToolPipeline(ToolRegistry([tool("t", stuck)])), call("a", "t"))
    )
    await eventually(lambda: rec.started)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    await asyncio.wait_for(stopped.wait(), 1)
    assert rec.results == []
