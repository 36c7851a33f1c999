"""The attribute rules beside the sentence model: a correction matched to the claim it ends by
the subject and attribute two texts share, without a model (`domain.attributes`)."""
# ruff: noqa: RUF001 - full-width punctuation is test data

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tavern_ledger.domain.attributes import Stated, probe_terms, targets
from tavern_ledger.domain.contradiction import is_correction

ROOT = Path(__file__).resolve().parents[3]


def _stated(*texts: str) -> list[Stated]:
    return [Stated(f"e{i}", t) for i, t in enumerate(texts)]


@pytest.mark.parametrize(
    ("correction", "statements"),
    [
        ("Actually, I moved to Berlin last month", ("I live in Paris", "My sister lives in Lyon")),
        (
            "Correction: Kevin now coaches in Leeds",
            ("Kevin coaches in Manchester", "Kevin has two kids"),
        ),
        ("I'm not vegetarian any more", ("I am vegetarian", "I cook every Sunday")),
        (
            "Actually, Yuki is from Sendai, not Sapporo",
            ("Yuki's hometown is Sapporo", "Yuki's hometown has a snow festival"),
        ),
        (
            "I no longer work at the bakery, I joined a bank",
            ("I work at the bakery on Elm Street", "I bake bread at home"),
        ),
        (
            "Tom changed his phone number to 0207 555 0199",
            ("Tom's phone number is 0207 555 0123", "Tom lives near the park"),
        ),
        ("更正：我现在搬到上海了", ("我住在北京", "我妹妹住在天津")),
        ("其实李明是电工，不是水管工", ("李明是个水管工", "李明自己开了个小公司")),
        ("外婆不再养鹦鹉了，她领养了一只猫", ("我外婆养了一只鹦鹉", "外婆住在乡下")),
        ("王芳的手术日期改为了6月1日", ("王芳的手术定在5月18日", "王芳做的是膝盖手术")),
    ],
)
def test_a_correction_replaces_the_statement_it_contradicts(
    correction: str, statements: tuple[str, ...]
) -> None:
    assert is_correction(correction)
    assert targets(correction, _stated(*statements)) == ["e0"]


@pytest.mark.parametrize(
    ("correction", "statements"),
    [
        (
            "Correction: Kevin's dog is called Biscuit, not Max",
            ("Kevin coaches in Manchester", "Kevin's team trains on Tuesdays"),
        ),
        (
            "Actually, Maria's cousin runs a bakery in Madrid",
            ("Maria and her husband met in Seville", "Maria's husband is a chef"),
        ),
        (
            "Lucas moved his piano lessons to the community centre",
            ("Lucas lives in Porto", "Lucas cycles to work"),
        ),
        ("其实我开的是沃尔沃，不是萨博", ("我住在厦门", "我家离公园很近")),
        ("Actually, I moved to Berlin", ()),
    ],
)
def test_a_correction_of_something_never_stated_replaces_nothing(
    correction: str, statements: tuple[str, ...]
) -> None:
    assert targets(correction, _stated(*statements)) == []


def test_a_tie_replaces_nothing_but_repetitions_of_the_best_go_together() -> None:
    tie = _stated("Anna lives in Bristol", "Anna lives in Bath")
    assert targets("Actually, Anna moved to Leeds", tie) == []
    again = _stated("I live in Paris", "I live in Paris", "I like Paris in spring")
    assert targets("Actually, I moved to Berlin", again) == ["e0", "e1"]


def test_a_statement_about_someone_else_is_not_replaced() -> None:
    assert targets("Actually, I moved to Berlin", _stated("My brother lives in Rome")) == []
    assert targets("更正：我现在住在上海", _stated("我哥哥住在杭州")) == []


@pytest.mark.parametrize(
    ("text", "correction"),
    [
        ("不对，改成四个空格", True),
        ("Actually I meant Tuesday", True),
        ("use tabs instead", True),
        ("I no longer eat meat", True),
        ("我不再喝咖啡了", True),
        ("I like it", False),
        ("记住：周五不部署", False),
        ("你是一个资深的后端工程师，任务是把这个服务拆成三个模块不要偷懒", False),
    ],
)
def test_corrections_are_told_by_their_phrasing(text: str, correction: bool) -> None:
    assert is_correction(text) is correction


def test_probes_find_statements_that_share_only_the_attribute() -> None:
    probes = probe_terms("Actually, I moved to Berlin")
    assert "live" in probes
    assert "住在" in probe_terms("更正：我搬到上海了")


def test_the_contradiction_corpus_is_matched_and_nothing_else_is_replaced() -> None:
    """The corpus of bench/contradiction.py through the matcher alone: each case's correction,
    told as one by its phrasing, against its fact and distractors."""
    corpus = json.loads((ROOT / "bench" / "data" / "contradiction.json").read_text())
    right, wrongly_replaced = 0, []
    for case in corpus["cases"]:
        stated = [Stated("fact", case["fact"])]
        stated += [Stated(f"d{i}", text) for i, text in enumerate(case["distractors"])]
        said = case["correction"]
        got = targets(said, stated) if is_correction(said) else []
        expected = ["fact"] if case["expect"] == "supersede" else []
        right += got == expected
        if set(got) - set(expected):
            wrongly_replaced.append(case["id"])
    assert right / len(corpus["cases"]) >= 0.95
    assert len(wrongly_replaced) <= 1, wrongly_replaced  # en-preference-13 picks a distractor
