"""Turn slots: a bounded number of turns run at once, the oldest first; a turn waiting on its
model lets its slot go and, taking one back, comes before turns that began after it."""

from __future__ import annotations

import asyncio

import pytest

from tavern_loop.config import LoopSettings, loop_options
from tavern_loop.slots import DEFAULT_TURN_SLOTS, TurnSlots


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_no_more_turns_run_at_once_than_there_are_slots() -> None:
    slots, running, most = TurnSlots(3), 0, 0

    async def turn(key: float) -> None:
        nonlocal running, most
        async with slots.slot(key):
            running += 1
            most = max(most, running)
            await asyncio.sleep(0.01)
            running -= 1

    await asyncio.gather(*(turn(k) for k in range(10)))
    assert most == 3
    assert (slots.held, slots.waiting) == (0, 0)


async def test_waiting_turns_are_served_oldest_first() -> None:
    slots, order = TurnSlots(1), list[float]()
    gate = asyncio.Event()

    async def turn(key: float) -> None:
        async with slots.slot(key):
            order.append(key)
            await gate.wait()

    first = asyncio.create_task(turn(0))
    await settle()
    later = [asyncio.create_task(turn(k)) for k in (5, 3, 4, 1)]  # arrive out of order
    await settle()
    assert slots.waiting == 4
    gate.set()
    await asyncio.gather(first, *later)
    assert order == [0, 1, 3, 4, 5]


async def test_a_turn_waiting_on_its_model_lets_its_slot_go_and_comes_back_first() -> None:
    slots, events = TurnSlots(1), list[str]()
    model = asyncio.Event()

    async def old_turn() -> None:
        async with slots.slot(1) as slot:
            events.append("old works")
            async with slot.let_go():
                await model.wait()
            events.append("old works again")

    async def new_turn(key: float, name: str) -> None:
        async with slots.slot(key):
            events.append(name)
            await asyncio.sleep(0.01)

    old = asyncio.create_task(old_turn())
    await settle()
    news = [asyncio.create_task(new_turn(2, "new 2")), asyncio.create_task(new_turn(3, "new 3"))]
    await settle()
    assert events == ["old works", "new 2"], "the slot went to a newer turn while the old waited"
    model.set()
    await asyncio.gather(old, *news)
    assert events == ["old works", "new 2", "old works again", "new 3"]


async def test_a_cancelled_waiter_gives_up_its_place_and_no_slot_is_lost() -> None:
    slots = TurnSlots(1)
    gate = asyncio.Event()

    async def holder() -> None:
        async with slots.slot(0):
            await gate.wait()

    held = asyncio.create_task(holder())
    await settle()
    waiter = asyncio.create_task(slots.acquire(1))
    await settle()
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    gate.set()
    await held
    assert slots.held == 0
    async with slots.slot(2):  # the slot is free again
        assert slots.held == 1


async def test_a_turn_cancelled_while_waiting_on_its_model_leaves_every_slot_free() -> None:
    slots = TurnSlots(1)
    waiting = asyncio.Event()

    async def turn() -> None:
        async with slots.slot(0) as slot, slot.let_go():
            waiting.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(turn())
    await waiting.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (slots.held, slots.waiting) == (0, 0)


async def test_no_limit_never_waits() -> None:
    slots = TurnSlots(0)
    async with slots.slot(0), slots.slot(1), slots.slot(2):
        assert slots.waiting == 0


def test_the_limit_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TAVERN_LOOP_TURN_SLOTS", raising=False)
    assert loop_options(LoopSettings()).turn_slots == DEFAULT_TURN_SLOTS == 0  # off
    monkeypatch.setenv("TAVERN_LOOP_TURN_SLOTS", "64")
    assert loop_options(LoopSettings()).turn_slots == 64
    monkeypatch.setenv("TAVERN_LOOP_TURN_SLOTS", "-1")
    with pytest.raises(ValueError, match="loop_turn_slots"):
        LoopSettings()
    with pytest.raises(ValueError, match="0 \\(no limit\\) or more"):
        TurnSlots(-1)
