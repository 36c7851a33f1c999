"""The st chat folded from a log: replies, swipes, regenerations, what a swipe may target."""

from __future__ import annotations

from tavern_loop.domain.stchat import history_range, reply_target, st_chat
from tests.unit.profiles.builders import Log


def test_chat_lines_skip_injected_context_and_tool_work() -> None:
    log = Log()
    log.created(architecture="st")
    log.turn(1)
    log.user("[recall] something", source="plugin:ledger")
    log.user("Hello")
    log.reply("", "c1")
    log.reply("Welcome.")
    assert [(e.is_user, e.text) for e in st_chat(log.events)] == [
        (True, "Hello"),
        (False, "Welcome."),
    ]


def test_a_swipe_adds_a_swipe_and_a_regeneration_replaces_the_reply() -> None:
    log = Log()
    log.turn(1)
    log.user("Hello")
    first = log.reply("One.")
    log.reply("Two.", form="swipe")
    (_, reply) = st_chat(log.events)
    assert (reply.seq, reply.text, reply.swipes) == (first.seq, "Two.", ("One.", "Two."))
    log.reply("Three.", form="regenerate")
    (_, reply) = st_chat(log.events)
    assert (reply.seq, reply.text, reply.swipes) == (first.seq, "Three.", ("Three.",))


def test_a_swipe_needs_a_reply_to_a_user_line() -> None:
    log = Log()
    assert reply_target(st_chat(log.events), "swipe") is not None
    log.turn(1)
    log.user("Hello")
    assert "does not end with a reply" in (reply_target(st_chat(log.events), "swipe") or "")
    log.reply("Hi.")
    assert reply_target(st_chat(log.events), "regenerate") is None


def test_history_ranges_are_inclusive_and_none_is_empty() -> None:
    log = Log()
    log.turn(1)
    a, b, c = log.user("a"), log.reply("b"), log.user("c")
    chat = st_chat(log.events)
    assert [e.text for e in history_range(chat, b.seq, c.seq)] == ["b", "c"]
    assert history_range(chat, None, None) == []
    assert [e.text for e in history_range(chat, a.seq, a.seq)] == ["a"]
