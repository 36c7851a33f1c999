"""Text measures: bigrams, Jaccard, overlap, acknowledgements (acp.md §12.2, §16, §18)."""
# ruff: noqa: RUF001 - full-width characters are test data (Chinese text)

from __future__ import annotations

from tavern_consolidator.domain.text import bigrams, is_ack_text, jaccard, overlap


def test_bigrams_ignore_punctuation_and_spaces() -> None:
    assert bigrams("配置，代码") == {"配置", "置代", "代码"}
    assert bigrams("a") == {"a"}
    assert bigrams("！？") == set()


def test_jaccard_of_two_empty_sets_is_one() -> None:
    assert jaccard(set(), set()) == 1.0
    assert jaccard({"ab"}, {"ab", "bc"}) == 0.5


def test_overlap_is_measured_against_the_smaller_set() -> None:
    assert overlap("配置和代码分开放", "记得配置和代码分开放好") == 1.0
    assert overlap("完全不同", "配置代码") == 0.0


def test_acknowledgements_are_recognised_as_in_acp() -> None:
    for text in ("继续吧", "重启好了", "？？？", "", "好的"):
        assert is_ack_text(text), text
    for text in ("可以push", "B+C吧", "行，那就2吧", "我喜欢把配置和代码分开放，这样更清楚一些吧"):
        assert not is_ack_text(text), text
