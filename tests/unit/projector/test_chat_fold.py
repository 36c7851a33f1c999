"""The chat projection's fold: which events become lines, and exactly once."""

from __future__ import annotations

from datetime import UTC

from tavern_events.session import SessionBindingChanged, SessionBindingChangedPayload
from tavern_projector.domain import chat
from tavern_projector.domain.chat import ChatBinding
from tests.unit.projector.builders import at, replied, requested, said, tool_call

BINDING = ChatBinding("s1", "s1", "Mira", "Ren")


def fresh() -> chat.ChatState:
    return chat.new_chat(BINDING, at(1), UTC)


def fold(*events: object) -> chat.ChatState:
    state = fresh()
    for event in events:
        chat.apply(state, event, UTC)  # type: ignore[arg-type]
    return state


def test_user_and_assistant_lines_look_like_sillytavern() -> None:
    state = fold(said("Hello?", 2), requested(3), replied("The door creaks open.", 4))
    user, reply = state.messages
    assert list(user) == ["name", "is_user", "is_system", "send_date", "mes", "extra"]
    assert user["extra"] == {
        "isSmallSys": False,
        "agentTavern": {
            "architecture": "agent-tavern",
            "contextMode": "dsh-native",
            "sessionId": "s1",
            "eventSeq": 2,
            "messageId": "e2",
            "turn": 1,
            "step": 1,
        },
    }
    assert list(reply) == [
        "extra",
        "name",
        "is_user",
        "send_date",
        "mes",
        "gen_started",
        "gen_finished",
        "swipe_info",
        "swipe_id",
        "swipes",
    ]
    assert (reply["name"], reply["swipes"], reply["swipe_id"]) == (
        "Mira",
        ["The door creaks open."],
        0,
    )
    assert reply["gen_started"] == "2026-03-02T09:14:08.000Z", "the model request's time"
    assert reply["swipe_info"][0]["extra"] == reply["extra"]
    assert reply["swipe_info"][0]["extra"] is not reply["extra"]
    assert state.last_seq == 4


def test_injected_context_and_tool_steps_are_not_chat() -> None:
    state = fold(
        said("recalled facts", 2, source="plugin:ledger", form="recall"),
        said("   ", 3),
        replied("let me look", 4, tool_calls=(tool_call(),)),
        replied("", 5),
    )
    assert state.messages == []


def test_a_cancelled_partial_reply_is_kept_and_marked() -> None:
    state = fold(replied("The lantern fl", 2, partial=True, finish_reason="cancelled"))
    mark = state.messages[0]["extra"]["agentTavern"]
    assert (mark["partial"], mark["finishReason"]) == (True, "cancelled")
    assert state.messages[0]["mes"] == "The lantern fl"
    assert fold(replied("  ", 2, partial=True, finish_reason="cancelled")).messages == []


def test_events_already_projected_change_nothing() -> None:
    state = fold(said("one", 2), replied("two", 3))
    before = state.render()
    chat.apply(state, said("one", 2), UTC)
    chat.apply(state, replied("two", 3), UTC)
    assert state.render() == before
    reread = chat.from_file(BINDING, state.header, list(state.messages))
    assert reread.last_seq == 3


def test_user_name_comes_from_the_message_then_the_binding() -> None:
    state = fold(said("hi", 2, name="Ren the Bold"), said("again", 3))
    assert [m["name"] for m in state.messages] == ["Ren the Bold", "Ren"]


def test_a_binding_change_shows_in_later_provenance() -> None:
    change = SessionBindingChanged(
        id="e3",
        session_id="s1",
        seq=3,
        ts=at(3),
        payload=SessionBindingChangedPayload(
            from_architecture="agent-tavern",
            from_context_mode="dsh-native",
            to_architecture="agent-tavern",
            to_context_mode="agent-managed",
        ),
    )
    state = fold(said("a", 2), change, said("b", 4))
    modes = [m["extra"]["agentTavern"]["contextMode"] for m in state.messages]
    assert modes == ["dsh-native", "agent-managed"]


def test_a_fork_copies_the_parent_up_to_the_fork_point() -> None:
    parent = fold(said("a", 2), replied("b", 3), said("c", 4), replied("d", 5))
    child = ChatBinding("s2", "s2", "Mira", "Ren", parent_session_id="s1", forked_at_seq=3)
    copied = chat.fork_lines(parent, 3)
    state = chat.new_chat(child, at(9), UTC, copied)
    assert [m["mes"] for m in state.messages] == ["a", "b"]
    assert state.header["chat_metadata"]["main_chat"] == "s1"
    assert state.last_seq == 0, "the parent's lines are not the child's"
    chat.apply(state, said("e", 2, sid="s2"), UTC)
    assert [m["mes"] for m in state.messages] == ["a", "b", "e"]


def test_redaction_blanks_the_line_and_later_replays() -> None:
    state = fold(said("secret 4417", 2), replied("ok", 3, reasoning_content="noted"))
    assert chat.redact(state, 2)
    assert not chat.redact(state, 9)
    assert state.messages[0]["mes"] == chat.REDACTED
    assert state.messages[0]["extra"]["agentTavern"]["redacted"] is True
    again = fresh()
    again.redacted = {3}
    chat.apply(again, replied("ok 4417", 3, reasoning_content="4417"), UTC)
    line = again.messages[0]
    assert (line["mes"], line["swipes"]) == (chat.REDACTED, [chat.REDACTED])
    assert b"4417" not in again.render()
    assert b"4417" not in state.render()
