"""Turn slots: how many turns of one replica advance their logs at once, oldest turn first.

Under a fleet every running turn appends to its session log, asks the ledger and projects; a
turn's appends wait in line behind every other turn's at the stream, one append after the
other. With every turn running at once (200 sessions), each append waited behind about 200
others (some 115 ms), so a turn with a tool call (two model requests, 14 appends) took four
times as long as a chat turn and made the tail: under the load of `bench/load.py`, chat turns
p50 0.7 s, turns with a tool call p50 2.7 s, all p99 3.3 s. With a bounded number running and
the rest waiting their turn in order of arrival, each turn waits about as long as any other and
then runs quickly: the mean stays what the machine allows (200 sessions over the turns a second
it does), the tail comes in towards it (every kind of turn p50 1.7-2.3 s, all p99 2.8 s, at
the same 90 turns a second). Too few slots starve the machine: 12 did 67 turns a second.

It is off by default (0): with a model that streams (30 words a second), 64 slots made the
tail worse, not better (p99 3.2 → 3.9 s, turns/s 5% fewer, two interleaved rounds of
200 x 20), so it is for models that answer at once (a local model, the offline stand-in).

A slot is held while the turn does its own work (appends, recall, its tools, its bookkeeping)
and let go while it waits on the model's reply: a slow model then does not hold back other
sessions (a long tool call does hold its slot). Taking a slot back, a turn comes before every
turn that began after it, so a turn once started is not overtaken by newer ones.

Pure asyncio; no IO. A limit of 0 means no limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import AsyncIterator

DEFAULT_TURN_SLOTS = 0


class TurnSlots:
    """A semaphore whose waiters are served by key (a turn's start time), lowest first."""

    def __init__(self, limit: int) -> None:
        if limit < 0:
            raise ValueError("the number of turn slots must be 0 (no limit) or more")
        self.limit = limit
        self.held = 0
        self._waiting: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    @property
    def waiting(self) -> int:
        return sum(1 for *_, future in self._waiting if not future.done())

    async def acquire(self, key: float) -> None:
        """Wait for a slot; turns with lower keys are served first."""
        if self.limit == 0:
            return
        if self.held < self.limit and not self.waiting:
            self.held += 1
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (key, next(self._order), future))
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release()  # handed a slot in the moment it was cancelled: pass it on
            raise

    def release(self) -> None:
        if self.limit == 0:
            return
        while self._waiting:
            *_, future = heapq.heappop(self._waiting)
            if not future.done():
                future.set_result(None)  # the slot goes straight to the next turn
                return
        self.held = max(0, self.held - 1)

    @contextlib.asynccontextmanager
    async def slot(self, key: float) -> AsyncIterator[Slot]:
        """Hold a slot for the block (the turn), served by `key`."""
        await self.acquire(key)
        held = Slot(self, key)
        try:
            yield held
        finally:
            if held.holding:
                held.holding = False
                self.release()


class Slot:
    """One turn's slot."""

    def __init__(self, slots: TurnSlots, key: float) -> None:
        self._slots, self.key = slots, key
        self.holding = True

    @contextlib.asynccontextmanager
    async def let_go(self) -> AsyncIterator[None]:
        """Give the slot up for the block (a wait on the outside) and take one back after it,
        ahead of every turn that began later. Cancelled meanwhile, the turn holds none."""
        if not self.holding:
            yield
            return
        self.holding = False
        self._slots.release()
        try:
            yield
        finally:
            await self._slots.acquire(self.key)
            self.holding = True
