"""SillyTavern's on-disk conventions."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from tavern_projector.domain import stformat


@pytest.mark.parametrize(
    ("hour", "minute", "shown"),
    [
        (0, 5, "12:05am"),
        (9, 14, "9:14am"),
        (12, 0, "12:00pm"),
        (14, 20, "2:20pm"),
        (23, 59, "11:59pm"),
    ],
)
def test_send_date_reads_like_sillytavern(hour: int, minute: int, shown: str) -> None:
    ts = datetime(2023, 6, 19, hour, minute, 7, tzinfo=UTC)
    assert stformat.send_date(ts, UTC) == f"June 19, 2023 {shown}"


def test_send_date_uses_the_configured_time_zone() -> None:
    ts = datetime(2026, 3, 2, 23, 30, tzinfo=UTC)
    assert stformat.send_date(ts, ZoneInfo("Asia/Shanghai")) == "March 3, 2026 7:30am"


def test_create_date_and_js_iso() -> None:
    ts = datetime(2026, 3, 2, 9, 4, 5, 120999, tzinfo=UTC)
    assert stformat.create_date(ts, UTC) == "2026-03-02@09h04m05s"
    assert stformat.js_iso(ts) == "2026-03-02T09:04:05.120Z"


@pytest.mark.parametrize(
    ("name", "safe"),
    [("Mira", "Mira"), ("a/b\\c:d*e?", "abcde"), ("  ..", "_"), ("CON", "_"), ("苏青", "苏青")],
)
def test_safe_name(name: str, safe: str) -> None:
    assert stformat.safe_name(name) == safe


def test_render_is_compact_json_per_line_and_parses_back() -> None:
    header = {"user_name": "Ren", "character_name": "苏青", "chat_metadata": {}}
    messages = [{"name": "Ren", "mes": 'line\n"two" \u2028 é'}]
    data = stformat.render(header, messages)
    assert data == (
        b'{"user_name":"Ren","character_name":"\xe8\x8b\x8f\xe9\x9d\x92","chat_metadata":{}}\n'
        + '{"name":"Ren","mes":"line\\n\\"two\\" \u2028 é"}\n'.encode()
    )
    assert stformat.parse(data) == (header, messages)


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"", "chat log is empty"),
        (b'{"a":1}\n[1]\n', "line 2: not a JSON object"),
        (b"{\n", "line 1"),
    ],
)
def test_parse_names_the_bad_line(data: bytes, problem: str) -> None:
    with pytest.raises(stformat.ChatFormatError, match=problem):
        stformat.parse(data)


def test_a_cards_chats_folder_is_its_png_file_stem() -> None:
    from tavern_projector.domain.stformat import card_stem

    assert card_stem("default_Seraphina.png") == "default_Seraphina"
    assert card_stem("Mira.PNG") == "Mira"
    assert card_stem("cards/x/Mira.png") == "Mira"
    assert card_stem("mira.json") is None
    assert card_stem(None) is None
    assert card_stem(".png") is None
