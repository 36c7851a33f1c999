"""Which live inputs make a step boundary read INPUTS (pure)."""

from __future__ import annotations

from dataclasses import dataclass

from tavern_loop.inputs import Arrivals


@dataclass
class Delivered:
    """The part of a core message `Arrivals` reads."""

    headers: dict[str, str] | None


def test_nothing_arrived_means_no_read() -> None:
    assert not Arrivals().waiting(set())


def test_an_input_waits_until_the_log_claims_it() -> None:
    arrivals = Arrivals()
    arrivals.note(Delivered({"Nats-Msg-Id": "in-1"}))  # type: ignore[arg-type]
    assert arrivals.waiting({"in-0"})
    arrivals.read()
    assert arrivals.waiting({"in-0"})  # read but not claimed (a command, or not yet stored)
    assert not arrivals.waiting({"in-0", "in-1"})
    assert arrivals.ids == set()  # claimed ones are forgotten


def test_an_input_without_an_id_makes_the_next_boundary_read_once() -> None:
    arrivals = Arrivals()
    arrivals.note(Delivered(None))  # type: ignore[arg-type]
    assert arrivals.waiting(set())
    arrivals.read()
    assert not arrivals.waiting(set())
