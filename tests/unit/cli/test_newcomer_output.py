"""What a new user reads: tool results as sentences, not raw JSON; the chat prompt and no
doubled lines; session ids whole on an 80-column terminal; every failure one line."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime

import pytest
from rich.console import Console

from tavern_cli.commands import sessions
from tavern_cli.conversation import Renderer, readable
from tavern_cli.main import guarded
from tavern_events.ids import new_id
from tavern_events.message import UserMessage, UserMessagePayload
from tavern_runtime.errors import ConfigurationError
from tests.unit.ledger.builders import tool_result

RECALL = {
    "items": [
        {"evidenceId": "ev_01", "content": "Ada sails a blue 19-foot sloop called Nautilus"},
        {"evidenceId": "ev_02", "content": "Ada sails on weekends"},
    ],
    "tokenEstimate": 31,
    "truncated": False,
}


def test_a_json_tool_result_reads_as_key_value_pairs() -> None:
    shown = readable(json.dumps(RECALL))
    assert shown.startswith("items: 2 items: 'Ada sails a blue 19-foot sloop called")
    assert "tokenEstimate: 31" in shown
    assert "{" not in shown
    assert '"' not in shown


def test_plain_text_and_long_values_stay_flat_and_bounded() -> None:
    assert readable("line one\n  line two") == "line one line two"
    long = readable(json.dumps({"text": "word " * 200}))
    assert len(long) <= 160
    assert long.endswith("…")


def test_the_renderer_shows_tool_results_readably() -> None:
    out = io.StringIO()
    Renderer(out, colour=False).render(tool_result(content=json.dumps(RECALL), name="recall"))
    line = out.getvalue()
    assert line.startswith("  ← recall: items: 2 items")
    assert '{"items"' not in line


def _typed(text: str, input_id: str) -> UserMessage:
    return UserMessage(
        id=new_id(),
        session_id="s1",
        seq=1,
        ts=datetime.now(UTC),
        payload=UserMessagePayload(text=text, input_id=input_id),
    )


def test_the_chat_prompt_is_shown_and_a_typed_line_is_not_printed_again() -> None:
    out = io.StringIO()
    renderer = Renderer(out, colour=False, prompt="you> ")
    renderer.show_prompt()
    renderer.show_prompt()  # shown once until answered
    renderer.prompt_answered()
    renderer.own_inputs.add("in_1")
    renderer.render(_typed("hello there", "in_1"))
    renderer.render(_typed("from elsewhere", "in_2"))
    assert out.getvalue() == "you> you: from elsewhere\n"


def test_without_a_prompt_every_user_line_is_shown() -> None:
    out = io.StringIO()
    renderer = Renderer(out, colour=False)
    renderer.own_inputs.add("in_1")
    renderer.render(_typed("hello there", "in_1"))
    assert out.getvalue() == "you: hello there\n"


def _row(session_id: str) -> dict[str, object]:
    return {
        "session_id": session_id,
        "architecture": "agent-tavern",
        "context_mode": "dsh-native",
        "character_id": "char_01jz9x2k3m4n5p6q",
        "turns": 12,
        "open_turn": False,
        "turns_completed": 11,
        "turns_cancelled": 1,
        "turns_failed": 0,
        "prompt_tokens": 123456,
        "completion_tokens": 7890,
        "last_activity": datetime.now(UTC).isoformat(),
        "needs_repair": False,
        "chat_key": "chat-with-a-long-name-2026-12-02",
    }


def test_session_ids_are_never_cut_on_an_80_column_terminal() -> None:
    ids = ["demo-e5f6a7b8c9d0", "chat-01jz9x2k3m4n", "s-0123456789ab"]
    console = Console(width=80, file=io.StringIO(), color_system=None)
    console.print(sessions.render([_row(i) for i in ids], datetime.now(UTC)))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    for session_id in ids:
        assert session_id in text
    assert max(len(line) for line in text.splitlines()) <= 80


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (ConfigurationError("nothing is running"), "tavern chat: nothing is running"),
        (IsADirectoryError(21, "Is a directory", "cards"), "tavern chat: Is a directory: cards"),
        (b"\xff".decode, "tavern chat: not UTF-8 text (byte 0)"),
        (RuntimeError("boom"), "tavern chat: unexpected RuntimeError: boom"),
    ],
)
def test_an_error_a_command_lets_through_is_one_line_and_exit_1(
    error: object, expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    def body() -> int:
        if callable(error):
            error()
        raise error  # type: ignore[misc]

    assert guarded("chat", body) == 1
    captured = capsys.readouterr()
    assert captured.err.startswith(expected)
    assert len(captured.err.strip().splitlines()) == 1
    assert "Traceback" not in captured.err
