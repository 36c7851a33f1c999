"""The garbage collector's set-up for a long-running service (`tavern_runtime.collector`)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from tavern_runtime import collector


@pytest.fixture
def restored() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def test_settle_freezes_what_exists_and_spaces_out_young_collections(restored: None) -> None:
    kept = [{"n": n} for n in range(100)]  # containers alive at start: frozen, never walked
    before = gc.get_threshold()

    collector.settle()

    assert gc.get_freeze_count() >= len(kept)
    assert gc.get_threshold() == (collector.GEN0, before[1], before[2])
    assert before[0] < collector.GEN0


def test_cycles_made_after_settling_are_still_collected(restored: None) -> None:
    collector.settle()

    class Node:
        other: object = None

    a, b = Node(), Node()
    a.other, b.other = b, a
    del a, b

    assert gc.collect() >= 2
