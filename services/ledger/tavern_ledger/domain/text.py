"""Text measures of the ledger: lexical index terms (English stems without stopwords, other
Latin words, CJK bigrams), the ACP lexical score, and the CJK-aware token estimate used by budgets
(acp.md §8, §9.3, §9.4).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Mapping
from functools import lru_cache

import snowballstemmer

from tavern_runtime import tokens

TERMS_VERSION = 2
"""Bumped whenever `terms` changes: the postings of stored evidence are then rebuilt."""

MAX_INDEX_TERMS = 256
"""Distinct terms indexed per evidence row (a long tool output keeps its first 256)."""
MAX_QUERY_TERMS = 12

_CJK_CLASS = (
    "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002fa1f"
)
_WORDS = re.compile(rf"[{_CJK_CLASS}]+|[0-9a-z\u00c0-\u024f\u0370-\u03ff\u0400-\u04ff]+")
_CJK = re.compile(rf"[{_CJK_CLASS}]")
_ACP_CJK = re.compile("[\u4e00-\u9fff]")
_SPLIT = re.compile(r"[\s\W_]+", re.UNICODE)
_TOKEN_CJK = re.compile(
    "[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef\U00020000-\U0002fa1f]"
)
_STOPWORD_TEXT = """
a about above after again against all also am an and any are as at be because been before being
below between both but by can could did do does doing down during each else ever few for from
further had has have having he her here hers herself him himself his how i if in into is it its
itself just let me might more most must my myself no nor not now of off on once only or other
ought our ours ourselves out over own same shall she should so some such than that the their
theirs them themselves then there these they this those through to too under until up upon us
very was we were what when where whether which while who whom whose why will with within would
yet you your yours yourself yourselves
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
"""English function words: no index terms, no query terms (question words included)."""
_ENGLISH = snowballstemmer.stemmer("english")


def fold(text: str) -> str:
    """Lower case after NFKC (full-width letters and digits become ASCII; ASCII is its own
    NFKC form)."""
    if text.isascii():
        return text.lower()
    return unicodedata.normalize("NFKC", text).lower()


def terms(text: str, limit: int = MAX_INDEX_TERMS) -> list[str]:
    """Distinct lexical terms in first-seen order: English stems of Latin words (no stopwords,
    2+ chars) and CJK bigrams (a lone CJK character is its own term). Every ingested row is
    indexed by these, hence the inlined cases (`_run_terms` is the reference)."""
    found: dict[str, None] = {}
    for run in _WORDS.findall(fold(text)):
        if run[0] < "\u3040":  # below every CJK class: a Latin, Greek or Cyrillic word
            if 2 <= len(run) <= 64 and run not in STOPWORDS:
                found[stem(run)] = None
        elif len(run) == 1:
            found[run] = None
        else:
            found.update(dict.fromkeys([run[i : i + 2] for i in range(len(run) - 1)]))
        if len(found) >= limit:
            return list(found)[:limit]
    return list(found)


@lru_cache(maxsize=32768)
def term_counts(text: str) -> Mapping[str, int]:
    """Every lexical term of `text` with its number of occurrences (for term-frequency scores;
    the same terms as `terms`). Recall scores the same rows again and again, hence the cache
    (read-only results) and the inlined Latin case."""
    found: list[str] = []
    for run in _WORDS.findall(fold(text)):
        if run[0] < "\u3040":  # below every CJK class: a Latin, Greek or Cyrillic word
            if 2 <= len(run) <= 64 and run not in STOPWORDS:
                found.append(stem(run))
        else:
            found += _run_terms(run)
    return Counter(found)


def _run_terms(run: str) -> list[str]:
    if _CJK.match(run):
        if len(run) == 1:
            return [run]
        return [run[i : i + 2] for i in range(len(run) - 1)]
    if len(run) < 2 or run in STOPWORDS or len(run) > 64:
        return []
    return [stem(run)]


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """The Snowball English stem of a folded word (`researching` -> `research`); words in other
    scripts (accented Latin, Greek, Cyrillic) come back as they are, unless Snowball maps them."""
    found: str = _ENGLISH.stemWord(word)
    return found if len(found) >= 2 else word


def words(text: str) -> list[str]:
    """The folded words of `text` (Latin runs and CJK runs), stopwords included, unstemmed."""
    return _WORDS.findall(fold(text))


def query_terms(query: str) -> list[str]:
    """The terms a recall looks up (the first MAX_QUERY_TERMS)."""
    return terms(query, MAX_QUERY_TERMS)


def lexical_score(query: str, content: str) -> float:
    """acp.md §9.3: CJK queries score the share of their 2-char windows found in the content
    (1 if the content holds the whole query); others the share of their words found."""
    q, c = query.lower(), content.lower()
    tokens = [t for t in _SPLIT.split(q) if t]
    if not tokens:
        return 0.0
    if _ACP_CJK.search(q):
        if q in c:
            return 1.0
        windows = {q[i : i + 2] for i in range(len(q) - 1)} or {q}
        return sum(1 for w in windows if w in c) / len(windows)
    return sum(1 for t in tokens if t in c) / len(tokens)


RECALL_OTHER_RATE = 0.3
"""acp.md §9.4: recall budgets count 0.3 tokens per non-CJK character."""


def estimate_tokens(text: str) -> int:
    """ceil(1.0 per CJK character + 0.3 per other character) (acp.md §9.4), by the shared
    estimator of `tavern_runtime.tokens`."""
    return tokens.estimate_tokens(text, RECALL_OTHER_RATE)


def truncate_to_tokens(text: str, budget: int) -> str:
    """The longest prefix of `text` whose estimate stays within `budget`."""
    spent = 0.0
    for index, char in enumerate(text):
        spent += 1.0 if tokens.is_cjk(char) else RECALL_OTHER_RATE
        if math.ceil(spent) > budget:
            return text[:index]
    return text


def bigrams(text: str) -> set[str]:
    """2-character windows of `text` without spaces, punctuation and symbols (one char: itself)."""
    kept = "".join(ch for ch in text if not (ch.isspace() or unicodedata.category(ch)[0] in "PS"))
    if len(kept) <= 1:
        return {kept} if kept else set()
    return {kept[i : i + 2] for i in range(len(kept) - 1)}


def one_line(text: str) -> str:
    """`text` on one line: recall renders one item per line."""
    return " ".join(text.split())
