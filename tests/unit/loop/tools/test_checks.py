from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tavern_loop.domain.guard import GENTLE_TEXT, GuardConfig, RepeatGuard
from tavern_loop.tools import (
    ToolContext,
    ToolLimits,
    ToolOutput,
    ToolPipeline,
    ToolRegistry,
    parse_arguments,
)
from tavern_runtime.errors import ConfigurationError
from tests.unit.loop.tools.recording import Recorder, call, echo, tool

QUERY = {
    "type": "object",
    "properties": {"q": {"type": "string"}},
    "required": ["q"],
    "additionalProperties": False,
}


def _code(outcome: Any) -> str | None:
    return outcome.error.code if outcome.error else None


async def test_unknown_tool_is_an_error_result_and_still_logged_as_started() -> None:
    rec = Recorder()
    [outcome] = await rec.run(ToolPipeline(ToolRegistry()), call("a", "nope"))

    assert outcome.content == 'Error: unknown tool "nope"'
    assert not outcome.ok
    assert _code(outcome) == "UNKNOWN_TOOL"
    assert rec.log == [("call", "a"), ("result", "a")]


async def test_invalid_json_reaches_the_tool_raw_and_the_call_keeps_the_raw_text() -> None:
    received: list[Any] = []

    async def handle(args: Any, ctx: ToolContext) -> ToolOutput:
        received.append(args)
        return ToolOutput("ok")

    rec = Recorder()
    pipeline = ToolPipeline(ToolRegistry([tool("any", handle, parameters={})]))
    await rec.run(pipeline, call("a", "any", '{"q": oops'))

    assert received == ['{"q": oops']
    assert rec.started[0].arguments_raw == '{"q": oops'


async def test_invalid_json_fails_validation_of_an_object_schema() -> None:
    rec = Recorder()
    pipeline = ToolPipeline(ToolRegistry([tool("search", echo(), parameters=QUERY)]))
    [outcome] = await rec.run(pipeline, call("a", "search", "{not json"))

    assert _code(outcome) == "INVALID_ARGS"
    assert outcome.content.startswith("Error: invalid arguments: ")
    assert "is not of type 'object'" in outcome.content
    assert rec.started[0].arguments_raw == "{not json"


def test_empty_arguments_are_an_empty_object() -> None:
    assert parse_arguments("") == {}
    assert parse_arguments("  ") == {}
    assert parse_arguments('{"a": 1}') == {"a": 1}
    assert parse_arguments("[1") == "[1"


async def test_schema_rejection_never_runs_the_tool() -> None:
    ran: list[Any] = []

    async def handle(args: Any, ctx: ToolContext) -> ToolOutput:
        ran.append(args)
        return ToolOutput("ok")

    pipeline = ToolPipeline(ToolRegistry([tool("search", handle, parameters=QUERY)]))
    outcomes = await Recorder().run(
        pipeline, call("a", "search", "{}"), call("b", "search", '{"q": 3}')
    )

    assert ran == []
    assert outcomes[0].content == "Error: invalid arguments: 'q' is a required property"
    assert outcomes[1].content == "Error: invalid arguments: 3 is not of type 'string' at $.q"


async def test_arguments_over_the_size_limit_are_rejected() -> None:
    pipeline = ToolPipeline(ToolRegistry([tool("t", echo())]), ToolLimits(max_argument_bytes=10))
    [outcome] = await Recorder().run(pipeline, call("a", "t", '{"q": "' + "x" * 20 + '"}'))

    assert _code(outcome) == "ARGUMENTS_TOO_LARGE"
    assert outcome.content == "Error: arguments too large: 29 bytes (limit 10)"


async def test_calls_per_turn_are_counted_across_steps_of_the_turn() -> None:
    pipeline = ToolPipeline(ToolRegistry([tool("t", echo())]), ToolLimits(max_calls_per_turn=3))
    rec = Recorder()
    first = await rec.run(pipeline, call("a", "t"), call("b", "t"))
    second = await rec.run(pipeline, call("c", "t"), call("d", "t"))

    assert [o.ok for o in first + second] == [True, True, True, False]
    assert _code(second[1]) == "TOOL_CALL_LIMIT"
    assert second[1].content == "Error: tool call limit reached: 3 per turn"


async def test_a_denied_call_gets_the_reason_sync_or_async() -> None:
    def deny_sync(name: str, ctx: ToolContext) -> str | None:
        return "writes are not allowed in this scope" if name == "write" else None

    async def deny_async(name: str, ctx: ToolContext) -> str | None:
        return deny_sync(name, ctx)

    registry = ToolRegistry([tool("write", echo()), tool("read", echo())])
    for authorise in (deny_sync, deny_async):
        pipeline = ToolPipeline(registry, authorise=authorise)
        outcomes = await Recorder().run(pipeline, call("a", "write"), call("b", "read"))
        assert outcomes[0].content == "Error: writes are not allowed in this scope"
        assert _code(outcomes[0]) == "TOOL_DENIED"
        assert outcomes[1].ok


async def test_timeout_gives_the_exact_text() -> None:
    async def slow(args: Any, ctx: ToolContext) -> ToolOutput:
        await asyncio.sleep(10)
        return ToolOutput("late")

    registry = ToolRegistry([tool("own", slow, timeout_s=0.05), tool("default", slow)])
    pipeline = ToolPipeline(registry, ToolLimits(default_timeout_s=0.02))
    own, default = await Recorder().run(pipeline, call("a", "own"), call("b", "default"))

    assert own.content == "Error: tool call timed out after 50ms"
    assert _code(own) == "TOOL_TIMEOUT"
    assert own.error is not None
    assert own.error.message == "tool call timed out after 50ms"
    assert default.content == "Error: tool call timed out after 20ms"


async def test_a_timeout_error_raised_by_the_tool_itself_is_a_failure() -> None:
    async def raises(args: Any, ctx: ToolContext) -> ToolOutput:
        raise TimeoutError("upstream slow")

    [outcome] = await Recorder().run(
        ToolPipeline(ToolRegistry([tool("t", raises)])), call("a", "t")
    )

    assert _code(outcome) == "TOOL_FAILED"
    assert outcome.content == "Error: upstream slow"


async def test_a_tool_exception_becomes_an_error_result_and_the_run_goes_on() -> None:
    async def boom(args: Any, ctx: ToolContext) -> ToolOutput:
        raise RuntimeError("boom")

    registry = ToolRegistry([tool("boom", boom), tool("ok", echo())])
    outcomes = await Recorder().run(ToolPipeline(registry), call("a", "boom"), call("b", "ok"))

    assert outcomes[0].content == "Error: boom"
    assert _code(outcomes[0]) == "TOOL_FAILED"
    assert outcomes[1].ok


async def test_a_tool_failure_without_an_error_code_gets_one_and_cannot_conclude() -> None:
    async def fails(args: Any, ctx: ToolContext) -> ToolOutput:
        return ToolOutput("it broke", ok=False, concludes_turn=True)

    async def concludes(args: Any, ctx: ToolContext) -> ToolOutput:
        return ToolOutput("done", concludes_turn=True, data={"n": 1})

    registry = ToolRegistry([tool("f", fails), tool("c", concludes)])
    failed, done = await Recorder().run(ToolPipeline(registry), call("a", "f"), call("b", "c"))

    assert _code(failed) == "TOOL_FAILED"
    assert not failed.concludes_turn
    assert done.concludes_turn
    assert done.data == {"n": 1}


async def test_guard_reminds_at_the_third_identical_call_across_steps() -> None:
    pipeline = ToolPipeline(ToolRegistry([tool("t", echo())]), guard=RepeatGuard())
    rec = Recorder()
    reminders = [
        (await rec.run(pipeline, call(f"c{i}", "t", '{"a":1}')))[0].reminder for i in range(3)
    ]

    assert reminders == [None, None, GENTLE_TEXT]


async def test_guard_counts_rejected_calls_in_model_order() -> None:
    pipeline = ToolPipeline(ToolRegistry(), guard=RepeatGuard())
    outcomes = await Recorder().run(
        pipeline,
        call("a", "nope", '{"x": 1}'),
        call("b", "nope", '{ "x" : 1 }'),
        call("c", "nope", '{"x":1}'),
    )

    assert [o.reminder for o in outcomes] == [None, None, GENTLE_TEXT]


async def test_guard_excluded_tools_are_transparent() -> None:
    guard = RepeatGuard(GuardConfig(exclude=("todo*",)))
    registry = ToolRegistry([tool("t", echo()), tool("todo_write", echo())])
    outcomes = await Recorder().run(
        ToolPipeline(registry, guard=guard),
        call("a", "t"),
        call("b", "todo_write"),
        call("c", "t"),
        call("d", "todo_write"),
        call("e", "t"),
    )

    assert [o.reminder for o in outcomes] == [None, None, None, None, GENTLE_TEXT]


async def test_guard_chains_are_per_agent_and_reset_by_a_human_message() -> None:
    guard = RepeatGuard()
    pipeline = ToolPipeline(ToolRegistry([tool("t", echo())]), guard=guard)
    main, other = Recorder(agent_id="main"), Recorder(agent_id="other")
    await main.run(pipeline, call("a", "t"), call("b", "t"))
    await other.run(pipeline, call("c", "t"))
    guard.human_message("main")
    [outcome] = await main.run(pipeline, call("d", "t"))

    assert outcome.reminder is None


def test_registry_gives_openai_function_schemas_and_refuses_bad_tools() -> None:
    registry = ToolRegistry([tool("search", echo(), parameters=QUERY)])

    assert registry.names() == ["search"]
    assert registry.schemas() == [
        {
            "type": "function",
            "function": {"name": "search", "description": "the search tool", "parameters": QUERY},
        }
    ]
    with pytest.raises(ConfigurationError, match="already registered"):
        registry.register(tool("search", echo()))
    with pytest.raises(ConfigurationError, match="invalid schema"):
        registry.register(tool("bad", echo(), parameters={"type": 12}))


async def test_a_failing_authorise_hook_fails_the_call_not_the_run() -> None:
    def broken(name: str, ctx: ToolContext) -> str | None:
        raise KeyError("policy table")

    pipeline = ToolPipeline(ToolRegistry([tool("t", echo())]), authorise=broken)
    [outcome] = await Recorder().run(pipeline, call("a", "t"))

    assert _code(outcome) == "TOOL_FAILED"
    assert outcome.content == "Error: internal error: 'policy table'"
