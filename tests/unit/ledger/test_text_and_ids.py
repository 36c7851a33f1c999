"""Tokenisation, the lexical score, token estimates, and the ACP-exact id formulas."""
# ruff: noqa: RUF001 - full-width characters are test data (Chinese text, NFKC)

from __future__ import annotations

import hashlib
import random
import unicodedata

from tavern_ledger.domain import text as text_module
from tavern_ledger.domain.ids import (
    candidate_memory_id,
    content_hash,
    evidence_id,
    js_json,
    observation_id,
    rule_id,
    session_of_source_ref,
)
from tavern_ledger.domain.text import (
    bigrams,
    estimate_tokens,
    lexical_score,
    query_terms,
    stem,
    term_counts,
    terms,
    truncate_to_tokens,
    words,
)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_terms_are_english_stems_and_cjk_bigrams() -> None:
    assert terms("I prefer TEA, not coffee!") == ["prefer", "tea", "coffe"]
    assert terms("Researching, researched; she researches") == ["research"]
    assert terms("我喜欢茶") == ["我喜", "喜欢", "欢茶"]
    assert terms("用 Python 写") == ["用", "python", "写"]
    assert terms("ＦＵＬＬ width") == ["full", "width"]


def test_english_stopwords_and_question_words_are_no_terms() -> None:
    assert terms("When did she go to the park with them?") == ["go", "park"]
    assert query_terms("What did Caroline research?") == ["carolin", "research"]


def test_stems_keep_short_and_foreign_words() -> None:
    assert stem("paintings") == "paint"
    assert stem("is") == "is"  # a stem under two letters is not a term
    assert terms("Ünïcode café naïve") == ["ünïcode", "café", "naïv"]


def test_term_counts_match_terms_with_repeats() -> None:
    text = "Painting, painted, paints; 我喜欢喜欢 the end"
    assert dict(term_counts(text)) == {"paint": 3, "我喜": 1, "喜欢": 2, "欢喜": 1, "end": 1}
    assert set(term_counts(text)) == set(terms(text))
    assert words("Hello, 世界!") == ["hello", "世界"]


def test_terms_are_distinct_and_bounded() -> None:
    assert terms("tea tea tea") == ["tea"]
    assert len(terms(" ".join(f"w{i}" for i in range(1000)))) == 256
    assert len(query_terms(" ".join(f"w{i}" for i in range(100)))) == 12


def _reference_terms(text: str, limit: int) -> list[str]:
    """`terms` as its docstring states it, one run and one term at a time."""
    found: dict[str, None] = {}
    folded = unicodedata.normalize("NFKC", text).lower()
    for run in text_module._WORDS.findall(folded):
        for term in text_module._run_terms(run):
            found.setdefault(term)
            if len(found) >= limit:
                return list(found)
    return list(found)


def test_terms_agree_with_their_reference_on_mixed_scripts() -> None:
    rng = random.Random(7)
    pieces = [
        *"abcdefghij XYZ,.;!?-_'0123456789",
        *"我喜欢茶的一是在不了有和人这中大",
        *"ＦＵＬＬｗｉｄｔｈ　éüñßçΩπЖяぁア가\u200b",
        "the ",
        "running ",
        "我们 ",
        "Researching ",
    ]
    texts = ["".join(rng.choices(pieces, k=rng.randint(0, 300))) for _ in range(3000)]
    texts += [" ".join(f"w{i}" for i in range(400)), "茶" * 300, "我喜欢" * 200]
    for text in texts:
        for limit in (256, 12, 2):
            assert terms(text, limit) == _reference_terms(text, limit), (text, limit)


def test_lexical_score_follows_acp() -> None:
    assert lexical_score("喜欢什么风格回答", "用户喜欢详细的技术回答") == 2 / 7
    assert lexical_score("喜欢", "我喜欢茶") == 1.0
    assert lexical_score("tea or coffee", "I drink tea") == 1 / 3
    assert lexical_score("", "anything") == 0.0
    assert lexical_score("!!!", "anything") == 0.0


def test_token_estimate_is_cjk_aware() -> None:
    assert estimate_tokens("你好世界") == 4
    assert estimate_tokens("a" * 20) == 6
    assert estimate_tokens("你好abcde") == 4
    assert estimate_tokens("") == 0


def test_truncation_stays_within_budget() -> None:
    cut = truncate_to_tokens("你好世界" * 10, 5)
    assert cut == "你好世界你"
    assert estimate_tokens(truncate_to_tokens("abc " * 100, 10)) <= 10


def test_bigrams_ignore_spaces_and_punctuation() -> None:
    assert bigrams("配置，分开") == {"配置", "置分", "分开"}
    assert bigrams("a") == {"a"}
    assert bigrams(" . ") == set()


def test_js_json_matches_javascript() -> None:
    assert js_json({}) == "{}"
    assert (
        js_json({"sessionEventId": "会话:1", "b": [1, "x"]})
        == '{"sessionEventId":"会话:1","b":[1,"x"]}'
    )


def test_evidence_id_is_acp_exact() -> None:
    digest = content_hash("hello")
    assert digest == sha("hello")
    assert evidence_id({}, digest) == "ev_" + sha("{}|" + digest)[:24]
    ref = {"sessionEventId": "s1:2"}
    assert evidence_id(ref, digest) == "ev_" + sha('{"sessionEventId":"s1:2"}|' + digest)[:24]
    assert evidence_id(ref, digest) != evidence_id({"sessionEventId": "s1:3"}, digest)


def test_observation_rule_and_candidate_memory_ids_are_acp_exact() -> None:
    joined = "|".join(["s", "user", "likes", "work", "tea", '["ev_1","ev_2"]'])
    assert observation_id("s", " user ", "likes ", "work", "tea", ["ev_1", "ev_2"]) == (
        "obs_" + sha(joined)[:24]
    )
    assert rule_id("s", "habit", "be brief") == "rule_" + sha("s|habit|be brief")[:24]
    assert candidate_memory_id("s", "work", "x", ["b", "a"]) == candidate_memory_id(
        "s", "work", "x", ["a", "b"]
    )


def test_session_of_source_ref() -> None:
    assert session_of_source_ref({"sessionEventId": "old-session:5"}) == "old-session"
    assert session_of_source_ref({"sessionId": "s9", "sessionEventId": "x:1"}) == "s9"
    assert session_of_source_ref({"sessionEventId": "plain"}) == "plain"
    assert session_of_source_ref({}) == ""
