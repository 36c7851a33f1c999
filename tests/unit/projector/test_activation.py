"""SillyTavern keyword activation: selective logic, case, whole words, constants, order,
probability, scan depth, budgets, groups, recursion."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tavern_projector.domain import activation
from tavern_projector.domain.activation import Book, Message, ScanSettings
from tavern_runtime.cards import lorebook
from tavern_runtime.cards.fields import Fields


def entry(uid: int, keys: list[str], content: str = "", **fields: Any) -> dict[str, Any]:
    raw = {"key": keys, "content": content or f"entry {uid}", **fields}
    return lorebook.entry(Fields(raw, f"entries.{uid}"), uid)


def run(
    entries: list[dict[str, Any]],
    chat: list[str],
    settings: ScanSettings = ScanSettings(scan_depth=10),
    rng: float = 0.0,
    **book: Any,
) -> list[int]:
    messages = [Message("", text) for text in chat]
    outcome = activation.activate([Book("b", entries, **book)], messages, settings, lambda: rng)
    return [a.candidate.uid for a in outcome.activated]


@pytest.mark.parametrize(
    ("logic", "chat", "active"),
    [
        (lorebook.AND_ANY, "dragon and gold", True),
        (lorebook.AND_ANY, "dragon alone", False),
        (lorebook.NOT_ALL, "dragon gold silver", False),
        (lorebook.NOT_ALL, "dragon gold", True),
        (lorebook.NOT_ANY, "dragon gold", False),
        (lorebook.NOT_ANY, "dragon alone", True),
        (lorebook.AND_ALL, "dragon gold silver", True),
        (lorebook.AND_ALL, "dragon gold", False),
    ],
)
def test_selective_logic(logic: int, chat: str, active: bool) -> None:
    found = entry(1, ["dragon"], keysecondary=["gold", "silver"], selectiveLogic=logic)
    assert run([found], [chat]) == ([1] if active else [])


def test_secondary_keys_are_ignored_when_not_selective() -> None:
    found = entry(1, ["dragon"], keysecondary=["gold"], selective=False)
    assert run([found], ["dragon"]) == [1]


def test_case_sensitivity_global_and_per_entry() -> None:
    entries = [
        entry(1, ["Mira"]),
        entry(2, ["Mira"], caseSensitive=True),
        entry(3, ["mira"], caseSensitive=True),
    ]
    assert run(entries, ["MIRA waves"]) == [1]
    assert run(entries, ["Mira waves"]) == [1, 2]
    assert run(entries, ["MIRA"], ScanSettings(scan_depth=10, case_sensitive=True)) == []


def test_whole_words() -> None:
    entries = [
        entry(1, ["cat"], matchWholeWords=True),
        entry(2, ["cat"]),
        entry(3, ["black cat"], matchWholeWords=True),
    ]
    assert run(entries, ["a category"]) == [2]
    assert run(entries, ["the cat, sleeping"]) == [1, 2]
    assert run(entries, ["a black category"]) == [2, 3], "a multi-word key is a substring"
    assert run([entry(4, ["猫"], matchWholeWords=True)], ["小猫咪"]) == [4], (
        "CJK around a key is a boundary"
    )


def test_constant_entries_need_no_key_and_disabled_never_fire() -> None:
    entries = [entry(1, [], constant=True), entry(2, ["x"], disable=True), entry(3, [])]
    assert run(entries, ["x"]) == [1]


def test_candidates_go_by_order_then_uid_and_assemble_by_position() -> None:
    entries = [
        entry(1, ["k"], "low", order=10),
        entry(2, ["k"], "high", order=200),
        entry(3, ["k"], "mid", order=100, position=1),
        entry(4, ["k"], "also high", order=200),
    ]
    outcome = activation.activate(
        [Book("b", entries)], [Message("", "k")], ScanSettings(), lambda: 0.0
    )
    assert [a.candidate.uid for a in outcome.activated] == [2, 4, 3, 1]
    assert outcome.by_position() == {0: "low\nalso high\nhigh", 1: "mid"}


def test_probability_rolls_are_deterministic_with_a_seed() -> None:
    entries = [entry(i, ["k"], probability=50) for i in range(40)]
    seeded = [
        activation.activate(
            [Book("b", entries)],
            [Message("", "k")],
            ScanSettings(token_budget=10_000),
            random.Random(7).random,
        )
        for _ in range(2)
    ]
    first, second = ([a.candidate.uid for a in o.activated] for o in seeded)
    assert first == second
    assert 5 < len(first) < 35
    assert run([entry(1, ["k"], probability=0)], ["k"], rng=0.0) == [1], "a roll of 0 passes"
    assert run([entry(1, ["k"], probability=50)], ["k"], rng=0.9) == []
    assert run([entry(1, ["k"], probability=50, useProbability=False)], ["k"], rng=0.9) == [1]


def test_scan_depth_counts_the_newest_messages() -> None:
    chat = ["the dragon", "a quiet day", "nothing"]
    assert run([entry(1, ["dragon"])], chat, ScanSettings(scan_depth=2)) == []
    assert run([entry(1, ["dragon"])], chat, ScanSettings(scan_depth=3)) == [1]
    assert run([entry(1, ["dragon"], scanDepth=3)], chat, ScanSettings(scan_depth=1)) == [1]
    assert run([entry(1, ["dragon"])], chat, ScanSettings(scan_depth=1), scan_depth=3) == [1]
    assert run([entry(1, ["nothing"], scanDepth=0)], chat) == []


def test_names_are_scanned_and_start_markers_match_a_message_start() -> None:
    messages = [Message("Ren", "hello"), Message("Mira", "hi")]
    entries = [entry(1, ["\x01Ren:"]), entry(2, ["\x01hello"])]
    outcome = activation.activate([Book("b", entries)], messages, ScanSettings(), lambda: 0.0)
    assert [a.candidate.uid for a in outcome.activated] == [1]


def test_the_token_budget_stops_the_scan_and_book_budgets_skip_one() -> None:
    big = "x" * 350  # 100 tokens
    entries = [
        entry(1, ["k"], big, order=3),
        entry(2, ["k"], big, order=2),
        entry(3, ["k"], "tiny", order=1),
    ]
    settings = ScanSettings(scan_depth=5, token_budget=150)
    outcome = activation.activate([Book("b", entries)], [Message("", "k")], settings, lambda: 0.0)
    assert [a.candidate.uid for a in outcome.activated] == [1]
    assert outcome.dropped == {"b.2": "budget", "b.3": "budget"}
    free = [entry(1, ["k"], big), entry(2, ["k"], big, ignoreBudget=True)]
    assert run(free, ["k"], ScanSettings(token_budget=100)) == [1, 2]
    assert run(entries, ["k"], ScanSettings(token_budget=1000), token_budget=120) == [1, 3]


def test_the_default_budget_is_a_share_of_the_context() -> None:
    assert ScanSettings().budget == 1024
    assert ScanSettings(budget_cap=500).budget == 500


def test_delay_triggers_and_decorators() -> None:
    assert run([entry(1, ["k"], delay=3)], ["k", "k"]) == []
    assert run([entry(1, ["k"], delay=2)], ["k", "k"]) == [1]
    assert run([entry(1, ["k"], triggers=["swipe"])], ["k"]) == []
    assert run([entry(1, ["zzz"], "@@activate\nforced")], ["k"]) == [1]
    assert run([entry(1, ["k"], "@@dont_activate\nnever")], ["k"]) == []


def test_regex_keys() -> None:
    assert run([entry(1, ["/dra?gon/i"])], ["A DRGON"]) == [1]
    assert run([entry(1, ["/^never$/"])], ["never mind"]) == []


def test_inclusion_groups_keep_one_member() -> None:
    entries = [
        entry(1, ["k"], group="g", order=10),
        entry(2, ["k"], group="g", order=20, groupOverride=True),
        entry(3, ["k"], group="g"),
    ]
    assert run(entries, ["k"]) == [2], "override wins"
    weighted = [
        entry(1, ["k"], group="g", groupWeight=1),
        entry(2, ["k"], group="g", groupWeight=99),
    ]
    assert run(weighted, ["k"], rng=0.5) == [2]
    assert run(weighted, ["k"], rng=0.001) == [1]
    scored = [entry(1, ["k"], group="g", useGroupScoring=True), entry(2, ["k", "q"], group="g")]
    assert run(scored, ["k q"]) == [2], "the member matching more keys wins"


def test_recursion_scans_activated_content() -> None:
    entries = [
        entry(1, ["king"], "The king has a sword."),
        entry(2, ["sword"], "The sword is old."),
    ]
    assert run(entries, ["the king"]) == [1]
    assert run(entries, ["the king"], ScanSettings(scan_depth=5, recursive=True)) == [1, 2]
    prevent = [entry(1, ["king"], "The king has a sword.", preventRecursion=True), entries[1]]
    assert run(prevent, ["the king"], ScanSettings(scan_depth=5, recursive=True)) == [1]


def test_a_thousand_entries_over_twenty_messages_stay_fast() -> None:
    import time

    entries = [
        entry(i, [f"word{i}", f"other{i}"], keysecondary=[f"s{i}"], selectiveLogic=i % 4)
        for i in range(1000)
    ]
    chat = [" ".join(f"word{j} s{j}" for j in range(i * 10, i * 10 + 10)) for i in range(20)]
    started = time.perf_counter()
    found = run(entries, chat, ScanSettings(scan_depth=20, token_budget=100_000))
    assert time.perf_counter() - started < 2.0
    assert len(found) > 0


def test_recursion_guards_and_its_depth_limit() -> None:
    chain = [
        entry(1, ["king"], "The king has a sword."),
        entry(2, ["sword"], "The sword came from the mountain."),
        entry(3, ["mountain"], "The mountain sleeps."),
    ]
    deep = ScanSettings(scan_depth=5, recursive=True)
    assert run(chain, ["the king"], deep) == [1, 2, 3]
    limited = ScanSettings(scan_depth=5, recursive=True, max_recursion_steps=2)
    assert run(chain, ["the king"], limited) == [1, 2], "two rounds: the chat, then one more"
    excluded = [chain[0], entry(2, ["sword"], "The sword.", excludeRecursion=True)]
    assert run(excluded, ["the king"], deep) == [1], "never activated by another entry"
    assert run(excluded, ["the king's sword"], deep) == [1, 2], "the chat itself still does"
    prevented = [entry(1, ["king"], "The king has a sword.", preventRecursion=True), chain[1]]
    assert run(prevented, ["the king"], deep) == [1], "its content starts no recursion"


def timed(
    entries: list[dict[str, Any]], chat: list[str], past: tuple[tuple[int, tuple[str, ...]], ...]
) -> list[int]:
    settings = ScanSettings(scan_depth=1, message_count=len(chat), past=past)
    return run(entries, chat, settings)


def test_sticky_keeps_an_entry_for_n_messages_without_its_keys() -> None:
    sticky = [entry(1, ["storm"], sticky=2)]
    assert timed(sticky, ["the storm"], ()) == [1]
    assert timed(sticky, ["the storm", "calm"], ((1, ("b.1",)),)) == [1]
    assert timed(sticky, ["the storm", "calm", "calm"], ((1, ("b.1",)), (2, ("b.1",)))) == [1]
    after = ((1, ("b.1",)), (2, ("b.1",)), (3, ("b.1",)))
    assert timed(sticky, ["the storm", "calm", "calm", "calm"], after) == [], "not extended"
    assert timed(sticky, ["the storm", "calm"], ((2, ("b.1",)),)) == [], "a swipe: not past"


def test_cooldown_keeps_an_entry_off_after_it_fired_and_after_sticky() -> None:
    cool = [entry(1, ["storm"], cooldown=2)]
    fired = ((1, ("b.1",)),)
    assert timed(cool, ["storm", "storm"], fired) == []
    assert timed(cool, ["storm", "storm", "storm"], fired) == []
    assert timed(cool, ["storm", "storm", "storm", "storm"], fired) == [1]
    both = [entry(1, ["storm"], sticky=1, cooldown=1)]
    assert timed(both, ["storm", "calm"], fired) == [1], "sticky first"
    assert timed(both, ["storm", "calm", "storm"], ((1, ("b.1",)), (2, ("b.1",)))) == []


def test_delay_counts_the_whole_chat_not_only_the_scanned_messages() -> None:
    late = [entry(1, ["storm"], delay=5)]
    assert run(late, ["storm"], ScanSettings(scan_depth=1, message_count=4)) == []
    assert run(late, ["storm"], ScanSettings(scan_depth=1, message_count=5)) == [1]


def test_an_entry_over_the_budget_is_cut_and_marked_when_asked() -> None:
    long = entry(1, ["storm"], "x" * 700)  # 200 tokens
    settings = ScanSettings(scan_depth=1, token_budget=50)
    outcome = activation.activate([Book("b", [long])], [Message("", "storm")], settings, lambda: 0)
    assert outcome.activated == []
    cut = ScanSettings(scan_depth=1, token_budget=50, truncate_over_budget=True)
    outcome = activation.activate([Book("b", [long])], [Message("", "storm")], cut, lambda: 0)
    (found,) = outcome.activated
    assert found.truncated
    assert found.tokens == 50
    assert activation.count_tokens(found.content) <= 50
    assert found.content == "x" * len(found.content)
