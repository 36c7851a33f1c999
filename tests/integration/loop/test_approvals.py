from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Mapping

import pytest
from nats.aio.msg import Msg

from tavern_loop.options import LoopOptions
from tavern_loop.recall import RECALL_SUBJECT
from tests.integration.loop.conftest import LoopBus
from tests.integration.loop.tools import ToolBench

pytestmark = pytest.mark.integration


async def test_pending_style_approvals_are_shown_at_the_first_step(bus: LoopBus) -> None:
    asked: list[str] = []

    async def consolidator(msg: Msg) -> None:  # answers as the consolidator's RPC does
        asked.append(json.loads(msg.data)["session_id"])
        reply = {"requests": [{"candidate_id": "c1", "reason": "prefers short answers"}]}
        await msg.respond(json.dumps(reply).encode())

    await bus.nc.subscribe("tavern.rpc.consolidator.approvals.next", cb=consolidator)
    await bus.engine()
    await bus.say("s1", "hello")
    events = await bus.turns_ended("s1", 1)
    shown = [e for e in events if e.type == "user/message" and e.form == "approval"]
    assert asked == ["s1"]
    assert len(shown) == 1
    assert shown[0].source == "plugin:consolidator"
    assert "- c1: prefers short answers" in shown[0].payload.text


async def test_no_consolidator_means_no_approval_message(bus: LoopBus) -> None:
    await bus.engine()
    await bus.say("s2", "hello")
    events = await bus.turns_ended("s2", 1)
    assert not [e for e in events if e.form == "approval"]
    assert events[-1].payload.outcome == "completed"


async def test_recall_and_approvals_are_asked_at_once_and_logged_in_that_order(
    bus: LoopBus,
) -> None:
    delay = 0.4
    asked: dict[str, float] = {}

    def slow(name: str, reply: Mapping[str, object]) -> Callable[[Msg], Awaitable[None]]:
        async def answer(msg: Msg) -> None:
            asked[name] = time.monotonic()
            await asyncio.sleep(delay)
            await msg.respond(json.dumps(reply).encode())

        return answer

    recalled = {"text": "- the user keeps bees", "count": 1}
    approvals = {"requests": [{"candidate_id": "c2", "reason": "prefers short answers"}]}
    await bus.nc.subscribe(RECALL_SUBJECT, cb=slow("recall", recalled))
    await bus.nc.subscribe(
        "tavern.rpc.consolidator.approvals.next", cb=slow("approvals", approvals)
    )
    await bus.engine()
    await bus.say("s3", "what do I keep?")
    events = await bus.turns_ended("s3", 1)

    assert set(asked) == {"recall", "approvals"}
    assert abs(asked["recall"] - asked["approvals"]) < delay  # neither waited for the other
    injected = [(e.source, e.form) for e in events if e.type == "user/message" and e.form]
    assert injected == [("plugin:ledger", "recall"), ("plugin:consolidator", "approval")]
    seqs = [e.seq for e in events]
    assert seqs == sorted(seqs)
    stamps = [e.ts for e in events]
    assert stamps == sorted(stamps)


async def test_a_later_step_asks_again_only_with_a_new_question_and_shows_only_new_lines(
    bus: LoopBus,
) -> None:
    """The ledger is asked before a turn's first step, and before a later step only for a
    question the turn has not asked (a message that joined at that step); what the turn already
    shows, even ranked otherwise, is not shown twice."""
    answers = iter(
        [
            "- [user] I keep bees\n- [user] my hives are blue",  # turn 1, step 1
            "- [user] I keep bees\n- [user] my hives are blue",  # turn 2, step 1: a new turn
            "- [user] my hives are blue\n- [user] I keep bees",  # step 2, new question: reordered
            "- [user] I keep bees\n- [user] my hives are blue",  # turn 3, step 1
            "- [user] I keep bees\n- [user] the queen is new",  # step 2: one line is new
        ]
    )
    asked: list[tuple[int, int, str]] = []

    async def ledger(msg: Msg) -> None:
        body = json.loads(msg.data)
        asked.append((body["turn"], body["step"], body["query"]))
        await msg.respond(json.dumps({"text": next(answers), "count": 2}).encode())

    await bus.nc.subscribe(RECALL_SUBJECT, cb=ledger)
    bench = ToolBench()
    await bus.engine(tools=bench.tools())
    await bus.say("s4", 'call echo with {"text": "bees"}')  # two steps, one question
    await bus.turns_ended("s4", 1)
    for turn, later in ((2, "and the hives?"), (3, "and the queen?")):
        bench.gate_entered.clear()
        bench.gate = asyncio.Event()
        await bus.say("s4", "call gate with {}")
        await asyncio.wait_for(bench.gate_entered.wait(), 10)
        await bus.say("s4", later)  # joins the turn at its next step: a new question
        bench.gate.set()
        events = await bus.turns_ended("s4", turn)

    assert asked == [
        (1, 1, 'call echo with {"text": "bees"}'),
        (2, 1, "call gate with {}"),
        (2, 2, "and the hives?"),
        (3, 1, "call gate with {}"),
        (3, 2, "and the queen?"),
    ]
    shown = [(e.turn, e.step, e.payload.text) for e in events if e.form == "recall"]
    assert [(turn, step) for turn, step, _ in shown] == [(1, 1), (2, 1), (3, 1), (3, 2)]
    assert shown[0][2].endswith("- [user] I keep bees\n- [user] my hives are blue")
    assert shown[3][2].endswith("- [user] I keep bees\n- [user] the queen is new")


async def test_a_step_whose_recall_went_unanswered_asks_again_at_the_next_step(
    bus: LoopBus,
) -> None:
    asked: list[int] = []

    async def ledger(msg: Msg) -> None:
        asked.append(json.loads(msg.data)["step"])
        if len(asked) == 1:
            await msg.respond(json.dumps({"error": {"code": "unavailable"}}).encode())
            return
        await msg.respond(json.dumps({"text": "- [user] I keep bees", "count": 1}).encode())

    await bus.nc.subscribe(RECALL_SUBJECT, cb=ledger)
    await bus.engine(tools=ToolBench().tools())
    await bus.say("s5", 'call echo with {"text": "bees"}')
    events = await bus.turns_ended("s5", 1)

    assert asked == [1, 2]
    shown = [(e.step, e.payload.text) for e in events if e.form == "recall"]
    assert [step for step, _ in shown] == [2]
    assert shown[0][1].endswith("- [user] I keep bees")


@pytest.mark.parametrize(
    ("quiet_s", "requests", "asked_turns"),
    [
        (30.0, [], [1]),  # none wait: the next turn, within the window, does not ask
        (0.0, [], [1, 2]),  # no window: every turn asks
        (30.0, [{"candidate_id": "c3", "reason": "terse"}], [1, 2]),  # more may wait
    ],
)
async def test_after_an_answer_that_none_wait_the_sessions_turns_stay_quiet_for_a_while(
    bus: LoopBus, quiet_s: float, requests: list[dict[str, str]], asked_turns: list[int]
) -> None:
    asked: list[str] = []

    async def consolidator(msg: Msg) -> None:
        asked.append(json.loads(msg.data)["session_id"])
        await msg.respond(json.dumps({"scope_id": "x", "requests": requests}).encode())

    await bus.nc.subscribe("tavern.rpc.consolidator.approvals.next", cb=consolidator)
    await bus.engine(options=LoopOptions(approvals_quiet_s=quiet_s))
    for turn in (1, 2):
        await bus.say("s6", f"hello {turn}")
        await bus.turns_ended("s6", turn)
    assert asked == ["s6"] * len(asked_turns)
    await bus.say("s7", "another session asks for itself")
    await bus.turns_ended("s7", 1)
    assert asked[-1] == "s7"


async def test_a_question_that_went_unanswered_is_asked_again_at_the_next_turn(
    bus: LoopBus,
) -> None:
    await bus.engine()
    await bus.say("s8", "nobody answers approvals yet")
    await bus.turns_ended("s8", 1)
    asked: list[str] = []

    async def consolidator(msg: Msg) -> None:
        asked.append(json.loads(msg.data)["session_id"])
        await msg.respond(json.dumps({"scope_id": "x", "requests": []}).encode())

    await bus.nc.subscribe("tavern.rpc.consolidator.approvals.next", cb=consolidator)
    await bus.nc.flush()
    await bus.say("s8", "now the consolidator is up")
    await bus.turns_ended("s8", 2)
    assert asked == ["s8"]
