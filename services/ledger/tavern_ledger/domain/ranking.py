"""Lexical relevance of recall candidates: BM25 over the scope's term statistics, lifted by the
conversation around each candidate (its neighbours in its session) and by the speaker the query
names. Pure: the statistics come from the store, the candidates from the read.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from tavern_ledger.domain.text import fold, query_terms, term_counts, words

BM25_K1 = 1.2
BM25_B = 0.5
"""Length normalisation below the textbook 0.75: chat turns are short and their length says
little about how much of them is on topic."""
NEIGHBOUR_WEIGHT = 0.6
"""Share of an adjacent turn's score a candidate takes: an answer often holds none of the words
of the question that its neighbour asked."""
SPEAKER_BOOST = 0.5
"""Relevance multiplier (1 + boost) for what the person the query names said."""
TIME_BOOST = 0.3
"""Relevance multiplier (1 + boost) for text that says when, if the query asks when."""
_NAME_PARTS = re.compile(r"[\s_.\-]+")
_ASKS_WHEN = re.compile(
    r"\b(?:when|what (?:year|month|day|date|time)|which (?:year|month|day)|how long ago)\b"
    r"|什么时候|哪一?年|哪一?天|几月|何时",
    re.IGNORECASE,
)
_SAYS_WHEN = re.compile(
    r"\b(?:yesterday|today|tonight|tomorrow|ago|last|next|this (?:week|month|year|weekend)"
    r"|weekend|week|month|year|years|january|february|march|april|may|june|july|august"
    r"|september|october|november|december|monday|tuesday|wednesday|thursday|friday"
    r"|saturday|sunday|recently|since|(?:19|20)\d\d)\b"
    r"|昨天|今天|明天|前天|后天|上周|下周|上个月|下个月|去年|今年|明年|周末|\d+年|\d+月|\d+日",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class CorpusStats:
    """The scope's statistics for the query's terms: how many documents, how many hold each."""

    documents: int
    frequencies: Mapping[str, int] = field(default_factory=dict)


class Document(NamedTuple):
    """What ranking needs of a candidate (a tuple: recall makes some 80 per step)."""

    id: str
    content: str
    speaker: str | None = None
    neighbours: tuple[str, ...] = ()
    """Ids of the evidence right before and after it in its session (as far as known)."""


def idf(frequency: int, documents: int) -> float:
    """BM25's inverse document frequency, never negative."""
    documents = max(documents, frequency)
    return math.log(1.0 + (documents - frequency + 0.5) / (frequency + 0.5))


def bm25(
    terms: Sequence[str],
    counts: Mapping[str, Mapping[str, int]],
    stats: CorpusStats,
) -> dict[str, float]:
    """Okapi BM25 of each document for `terms`; statistics the store did not give are taken
    from the documents themselves. (Recall scores some 80 rows per step: each document is
    visited once, its terms summed in query order.)"""
    if not counts:
        return {}
    lengths = {doc: sum(c.values()) for doc, c in counts.items()}
    average = max(1.0, sum(lengths.values()) / len(lengths))
    documents = max(stats.documents, len(counts))
    weights = []
    for term in dict.fromkeys(terms):
        frequency = stats.frequencies.get(term)
        if frequency is None:
            frequency = sum(1 for c in counts.values() if term in c)
        weights.append((term, idf(frequency, documents)))
    k1, lift = BM25_K1, BM25_K1 + 1
    asked = {term for term, _ in weights}
    scores = {}
    for doc, c in counts.items():
        score = 0.0
        if not asked.isdisjoint(c):
            norm = 1 - BM25_B + BM25_B * lengths[doc] / average
            for term, weight in weights:
                tf = c.get(term, 0)
                if tf:
                    score += weight * tf * lift / (tf + k1 * norm)
        scores[doc] = score
    return scores


def with_neighbours(scores: Mapping[str, float], docs: Iterable[Document]) -> dict[str, float]:
    """Each score plus NEIGHBOUR_WEIGHT of the scores of its adjacent documents (adjacency is
    symmetric: either side naming the other is enough)."""
    adjacent: dict[str, set[str]] = {}
    for doc in docs:
        for other in doc.neighbours:
            if other != doc.id and other in scores and doc.id in scores:
                adjacent.setdefault(doc.id, set()).add(other)
                adjacent.setdefault(other, set()).add(doc.id)
    lifted = dict(scores)
    for doc_id, others in adjacent.items():
        lifted[doc_id] = scores[doc_id] + NEIGHBOUR_WEIGHT * sum(scores[o] for o in others)
    return lifted


def named_speakers(query: str, speakers: Iterable[str]) -> frozenset[str]:
    """The speakers whose name (or a part of it, two letters or more) the query contains."""
    said = set(words(query))
    found = set()
    for speaker in speakers:
        parts = [p for p in _NAME_PARTS.split(fold(speaker)) if len(p) >= 2]
        if parts and any(p in said for p in parts):
            found.add(speaker)
    return frozenset(found)


def asks_when(query: str) -> bool:
    """The query asks for a time (`When did...`, `what year`, `什么时候`)."""
    return bool(_ASKS_WHEN.search(query))


def says_when(text: str) -> bool:
    """The text places something in time (`yesterday`, `last May`, `2022`, `去年`)."""
    return bool(_SAYS_WHEN.search(text))


def relevance(query: str, docs: Sequence[Document], stats: CorpusStats) -> dict[str, float]:
    """Lexical relevance in [0, 1] (the best document is 1; no match anywhere is all 0)."""
    terms = query_terms(query)
    counts = {d.id: term_counts(d.content) for d in docs}
    raw = with_neighbours(bm25(terms, counts, stats), docs)
    named = named_speakers(query, {d.speaker for d in docs if d.speaker})
    if named:
        boost = 1.0 + SPEAKER_BOOST
        raw = {d.id: raw[d.id] * (boost if d.speaker in named else 1.0) for d in docs}
    if asks_when(query):
        boost = 1.0 + TIME_BOOST
        raw = {d.id: raw[d.id] * (boost if says_when(d.content) else 1.0) for d in docs}
    best = max(raw.values(), default=0.0)
    if best <= 0:
        return dict.fromkeys(raw, 0.0)
    return {doc: value / best for doc, value in raw.items()}
