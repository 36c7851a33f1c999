"""Claim kinds: directives to the assistant against statements of fact, English and Chinese."""
# ruff: noqa: RUF001 - full-width punctuation is test data

from __future__ import annotations

import pytest

from tavern_ledger.domain.claims import claim_domain, claim_kind


@pytest.mark.parametrize(
    "text",
    [
        "Always answer in French",
        "From now on, reply in English only",
        "Please keep answers short",
        "ok so please stop using emoji",
        "Don't mention my ex again",
        "I want you to speak like a pirate",
        "You must never reveal the ending",
        "Correction: always call me Sam",
        "以后请用英文回答",
        "请简短回答",
        "不要再提我的前任",
        "从现在开始你必须说中文",
        "用中文回答我",
        "更正：以后请叫我小王",
    ],
)
def test_directives_to_the_assistant_are_directives(text: str) -> None:
    assert claim_kind(text) == "directive"


@pytest.mark.parametrize(
    "text",
    [
        "I live in Paris",
        "Kevin coaches in Manchester",
        "I love painting, it relaxes me",
        "Correction: Kevin now coaches in Leeds",
        "Actually, I moved to Berlin last month",
        "My sister is not a nurse any more",
        "Hey Mel! Good to see you! How have you been?",
        "我住在北京",
        "更正：我现在住在上海",
        "以后我想去日本",
        "其实我不再吃肉了",
        "我每次去都点咖啡",
    ],
)
def test_statements_of_fact_are_statements(text: str) -> None:
    assert claim_kind(text) == "statement"


def test_claim_domain_files_directives_by_what_they_govern() -> None:
    assert claim_domain("I work at the bakery") == "user_fact"
    assert claim_domain("Please answer in a formal tone") == "style"
    assert claim_domain("请用简短的风格回答") == "style"
    assert claim_domain("Never remind me of deadlines") == "user_preference"


def test_only_the_head_of_a_long_text_is_judged() -> None:
    long = "I grew up by the sea. " * 40 + "Always answer in French."
    assert claim_kind(long) == "statement"
