"""The rules channel: prefixes, repeated corrections, the overlap audit, the safety line, views."""
# ruff: noqa: RUF001 - full-width characters are test data (Chinese text)

from __future__ import annotations

from datetime import timedelta

from tavern_consolidator.domain.feedback import (
    ActiveRule,
    candidates,
    draft,
    explicit_body,
    over_safety_line,
    rule_id,
    stale_views,
    suspect,
)
from tavern_consolidator.domain.records import Evidence
from tavern_ledger.domain.claims import claim_domain
from tavern_ledger.domain.ids import rule_id as ledger_rule_id
from tests.unit.consolidator.builders import T0, evidence

NOW = T0 + timedelta(hours=1)


def test_every_explicit_prefix_is_recognised_in_either_colon_and_any_case() -> None:
    prefixed = ("记住：配置和代码分开", "更正:用四个空格", "规则：先写测试", "Remember: use uv",
                "please remember: tabs", "Correction: four spaces", "RULE: no globals")  # fmt: skip
    for text in prefixed:
        assert explicit_body(text), text
    assert explicit_body("记住：好") is None  # too short after the prefix
    assert explicit_body("I remember: nothing") is None
    assert explicit_body("  rule:  keep it short ") == "keep it short"


def directive(n: int, text: str, **kw: object) -> Evidence:
    """A person's directive as the ledger files it (claim domain from its text)."""
    return evidence(n, text, domain=claim_domain(text), **kw)  # type: ignore[arg-type]


def test_prefixed_first_then_repeated_corrections_at_most_three_and_never_twice() -> None:
    repeated = "不对，缩进要用四个空格而不是两个空格或者制表符"
    rows = [
        directive(1, repeated + "，一", authority="user_correction"),
        directive(2, "记住：配置和代码分开放"),
        directive(3, repeated + "，二", authority="user_correction"),
        directive(4, "rule: no globals", at=T0 - timedelta(days=8)),  # outside the window
        directive(5, "remember: run the tests", authority="external_information"),
    ]
    found = candidates(rows, frozenset(), NOW, 7)
    assert [(c.evidence.id[-1], c.gate) for c in found] == [
        ("2", "explicit-prefix"),
        ("3", "repeated-2x"),
    ]
    assert candidates(rows, frozenset({rows[1].id}), NOW, 7)[0].evidence.id == rows[2].id


def test_a_correction_of_a_fact_never_becomes_a_rule_draft() -> None:
    text = "Correction: my sister lives in Lisbon now, not Porto."
    rows = [
        evidence(1, text, authority="user_correction", domain=claim_domain(text)),
        evidence(2, text, authority="user_correction", domain=claim_domain(text)),
    ]
    assert claim_domain(text) == "user_fact"
    assert candidates(rows, frozenset(), NOW, 7) == []


def test_a_correction_overlapping_an_active_rule_is_a_suspect_unless_it_is_short() -> None:
    rule = ActiveRule("rule_1", "keep apart", "配置和代码分开放")
    hit = suspect("配置和代码一定要分开放好", [rule], 0.6)
    assert hit is not None
    assert hit.rule == rule
    assert hit.overlap >= 0.6
    assert suspect("分开放", [rule], 0.6) is None  # under 10 characters: no verdict
    assert suspect("今天天气很好，我们出去走走吧", [rule], 0.6) is None


def test_drafts_share_the_ledger_rule_id_and_long_rules_are_flagged() -> None:
    [c] = candidates([directive(1, "记住：配置和代码分开放")], frozenset(), NOW, 7)
    d = draft("c1", c)
    assert (
        d.id == ledger_rule_id("c1", "habit", "配置和代码分开放") == rule_id("c1", "habit", d.text)
    )
    assert (d.title, d.gates, d.evidence_ids) == (
        "配置和代码分开放",
        ("explicit-prefix",),
        (c.evidence.id,),
    )
    assert over_safety_line("x" * 41)
    assert not over_safety_line("x" * 40)


def test_stale_views_are_removed_but_never_when_no_domain_is_active() -> None:
    assert stale_views(["habit.md", "security.md"], ["habit"]) == ["security.md"]
    assert stale_views(["habit.md", "security.md"], []) == []
