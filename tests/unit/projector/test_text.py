"""CJK-aware search tokens and excerpts."""

from __future__ import annotations

import random
import re

from tavern_projector.domain import text


def test_latin_words_are_case_folded_words() -> None:
    assert text.index_tokens("The Lamp-room, LAMP!") == ["lamp", "room", "the"]
    assert text.query_tokens("lamp ROOM") == ["lamp", "room"]


def test_cjk_is_indexed_by_characters_and_bigrams() -> None:
    assert text.index_tokens("灯塔门") == sorted(["灯", "塔", "门", "灯塔", "塔门"])
    assert text.query_tokens("灯塔门") == ["塔门", "灯塔"]
    assert text.query_tokens("灯") == ["灯"], "a single character stays itself"


def test_mixed_scripts_split_where_the_script_changes() -> None:
    assert text.query_tokens("Mira说灯塔") == ["mira", "灯塔", "说灯"]
    assert text.query_tokens("ＡＢＣ１２") == ["abc12"], "full-width forms are normalised"  # noqa: RUF001
    assert text.query_tokens("？！、") == []  # noqa: RUF001


def test_a_query_matches_when_the_message_holds_every_token() -> None:
    message = set(text.index_tokens("暴风雨之夜，有人敲响灯塔的门 at midnight"))  # noqa: RUF001
    assert set(text.query_tokens("灯塔 midnight")) <= message
    assert not set(text.query_tokens("灯塔 noon")) <= message


def test_excerpt_starts_before_the_first_hit_and_marks_cuts() -> None:
    body = "x" * 500 + " lantern " + "y" * 500
    cut = text.excerpt(body, ["lantern"], width=100, lead=10)
    assert cut.startswith("…")
    assert cut.endswith("…")
    assert "lantern" in cut
    assert len(cut) == 102
    assert text.excerpt("short", ["short"]) == "short"


def test_rough_tokens() -> None:
    assert [text.rough_tokens(s) for s in ("", "abcd", "abcde")] == [1, 1, 2]


def _cjk(char: str) -> bool:
    return any(low <= ord(char) <= high for low, high in text.CJK_RANGES)


def _segments_by_character(folded: str) -> list[tuple[bool, str]]:
    """The plain definition, by code point: runs of letters and digits, cut where CJK-ness
    changes."""
    found: list[tuple[bool, str]] = []
    for run in re.findall(r"[^\W_]+", folded):
        start = 0
        for index in range(1, len(run) + 1):
            if index == len(run) or _cjk(run[index]) != _cjk(run[start]):
                found.append((_cjk(run[start]), run[start:index]))
                start = index
    return found


def test_segments_are_the_runs_cut_where_the_script_changes() -> None:
    pieces = ["灯塔", "Mira", "ｶﾀ", "한국", "12", " ", "_", "—", "。", "𠀀𠀁", "ㄱ", "Ä", "x_y"]
    edges = [(low - 1, low, high, high + 1) for low, high in text.CJK_RANGES]
    pieces += [chr(code) for codes in edges for code in codes]  # each range's ends, either side
    rng = random.Random(7)
    for _ in range(2000):
        said = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        assert text.segments(said) == _segments_by_character(text.normalise(said)), said
    assert text.segments("Mira说灯塔12") == [(False, "mira"), (True, "说灯塔"), (False, "12")]
