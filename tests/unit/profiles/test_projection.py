"""Agent-managed projection: required entries, units, zones, relevance, determinism."""

from __future__ import annotations

from tavern_llm.tokens import messages_tokens
from tavern_loop.domain.history import surface_of
from tavern_loop.domain.projection import Budget, project, query_of, revision, select, units
from tavern_loop.options import ProjectionOptions
from tests.unit.profiles.builders import Log

OPTIONS = ProjectionOptions()


def chatty(turns: int, words: int = 40) -> Log:
    """`turns` turns of small talk; turn 3 talks about the brass key."""
    log = Log()
    log.created()
    for turn in range(1, turns + 1):
        log.turn(turn)
        topic = "the brass key under the lamp" if turn == 3 else f"the weather on day {turn}"
        log.user(f"Turn {turn}: tell me about {topic}. " + "filler " * words)
        log.reply(f"About {topic}: " + "more filler " * words)
    return log


def test_everything_fits_a_large_window() -> None:
    log = chatty(5)
    nodes = surface_of(log.events).nodes()
    projection = select(nodes, 5, query_of(nodes, 5), Budget(128_000, 500, OPTIONS))
    assert projection.included == tuple(n.seq for n in nodes)
    assert project(nodes, projection.included) == surface_of(log.events).messages()


def test_a_small_budget_keeps_the_current_turn_recent_turns_and_the_relevant_one() -> None:
    log = chatty(12)
    log.turn(13)
    log.user("Where did I leave the brass key?")
    nodes = surface_of(log.events).nodes()
    budget = Budget(2400, 300, OPTIONS)
    projection = select(nodes, 13, query_of(nodes, 13), budget)
    included = project(nodes, projection.included)
    texts = [m["content"] for m in included]
    assert texts[-1] == "Where did I leave the brass key?"
    assert projection.required == (log.events[-1].seq,)
    assert any("Turn 12:" in t for t in texts), "the newest turns are recent"
    assert any("Turn 3:" in t for t in texts), "the relevant old turn is retrieved"
    assert not any("Turn 1:" in t for t in texts), "irrelevant old turns are left out"
    assert 300 + messages_tokens(included) <= projection.budget_tokens
    names = [z.name for z in projection.zones]
    assert names == ["kernel", "recent", "retrieved"]
    assert all(z.used_tokens <= z.budget_tokens for z in projection.zones[1:])


def test_a_tool_call_and_its_results_are_never_split() -> None:
    log = chatty(6)
    log.turn(7)
    log.user("look it up")
    log.reply("", "c1", "c2")
    log.result("c1", "first " * 300)
    log.result("c2", "second")
    nodes = surface_of(log.events).nodes()
    grouped = [u for u in units(nodes) if u.kind == "tools"]
    assert [len(u.nodes) for u in grouped] == [3]
    projection = select(nodes, 7, query_of(nodes, 7), Budget(1000, 200, OPTIONS))
    tail = log.events[-4:]
    assert {e.seq for e in tail} <= set(projection.included), "the current turn is required"


def test_old_tool_units_go_in_or_out_whole() -> None:
    log = Log()
    log.created()
    log.turn(1)
    log.user("search the archive")
    log.reply("", "c1")
    log.result("c1", "archive " * 400)
    log.reply("Found it.")
    for turn in range(2, 6):
        log.turn(turn)
        log.user(f"chat {turn} " + "x " * 100)
        log.reply("ok " * 100)
    nodes = surface_of(log.events).nodes()
    for window in (800, 1200, 2000, 4000, 8000):
        chosen = set(select(nodes, 5, "", Budget(window, 100, OPTIONS)).included)
        pair = {log.events[3].seq, log.events[4].seq}
        assert pair <= chosen or not pair & chosen, f"split at window {window}"


def test_the_kernel_is_never_squeezed_out() -> None:
    log = chatty(4)
    nodes = surface_of(log.events).nodes()
    projection = select(nodes, 4, query_of(nodes, 4), Budget(1000, 900, OPTIONS))
    kernel = projection.zones[0]
    assert (kernel.used_tokens, kernel.budget_tokens) == (900, 900)
    _recent, retrieved = projection.zones[1:]
    assert retrieved.budget_tokens == 0
    assert projection.required, "the current turn still goes"


def test_the_same_surface_and_settings_select_the_same_way() -> None:
    log = chatty(10)
    nodes = surface_of(log.events).nodes()
    first = select(nodes, 10, query_of(nodes, 10), Budget(3000, 200, OPTIONS))
    again = select(nodes, 10, query_of(nodes, 10), Budget(3000, 200, OPTIONS))
    assert first == again
    assert first.revision == revision(OPTIONS) != revision(ProjectionOptions(recent_ratio=0.3))
