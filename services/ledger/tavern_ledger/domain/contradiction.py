"""Corrections said in conversation and the earlier claims they contradict. A correction is
recognised by how it opens or turns ("Correction: …", "Actually, …", "… no longer …", "更正：…",
"…不再…"); what it contradicts is judged by meaning: the sentence model's similarity between the
correction (whole, and each of its clauses) and each earlier claim, with the words the two
share and the old value the correction names ("…, not Porto") as evidence beside it. The
clearly best claims are ended; where the model sees no clear match, the attribute rules of
`domain.attributes` may still ("I moved to Berlin" ends "I live in Paris"); a correction that
is near nothing ends nothing.
"""
# ruff: noqa: RUF001, RUF002 - full-width punctuation is part of the Chinese patterns

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tavern_ledger.domain.attributes import Stated, normal, probe_terms
from tavern_ledger.domain.attributes import targets as attribute_targets
from tavern_ledger.domain.claims import strip_marker
from tavern_ledger.domain.text import fold, terms

_TASK_BRIEF = ("你是", "You are", "任务：", "项目：")
_MARKERS_EN = re.compile(
    r"^\W*(?:correction|actually|update|to be clear|no wait)\b"
    r"|\b(?:correction|actually|instead|no longer|any ?more|not any more|switched)\b"
    r"|\bchanged (?:my|his|her|their|our|the|its|to|jobs?|roles?|teams?|schools?)\b"
    r"|\b(?:moved|relocated)\b"
    r"|\bi meant\b",
    re.IGNORECASE,
)
_MARKERS_ZH = re.compile(
    "更正|纠正|其实|不再|改成|改为|改到|换成|换到|搬到|搬去|搬回|不对|错了|说错|不是.{1,12}而是"
)


def is_correction(text: str) -> bool:
    """A person's message that corrects something said before (a long task brief never does)."""
    if len(text) >= 30 and text.startswith(_TASK_BRIEF):
        return False
    return bool(_MARKERS_ZH.search(text) or _MARKERS_EN.search(text))


@dataclass(frozen=True)
class Thresholds:
    """Tuned on the public Letta dev set (bench/contradiction.py), checked on our own corpus."""

    floor: float = 0.55
    """The least score a claim needs to be ended at all."""
    margin: float = 0.02
    """How far the best must lead the next different claim to be ended alone."""
    close: float = 0.14
    """Other claims of the best's message within this of it are ended with it when the lead
    over the rest is clear."""
    close_other: float = 0.04
    """Claims of other messages within this of the best are ended with it likewise."""
    words: float = 0.6
    """Weight of the share of content words the two texts hold in common."""
    named_old: float = 0.3
    """Bonus when the correction names a value as no longer so and the claim holds it."""


DEFAULT = Thresholds()
_NOT_VALUE_EN = re.compile(
    r"\b(?:not|no longer|instead of|rather than|isn't|aren't|wasn't|weren't)\s+"
    r"(?:in\s+|at\s+|a\s+|an\s+|the\s+)?([A-Za-z][\w'-]+(?:\s+[A-Z][\w'-]+)*)"
)
_NOT_VALUE_ZH = re.compile(
    "(?:不是|不再是|不在|而不是)([\u4e00-\u9fffA-Za-z0-9]{1,8}?)(?:了|[，。,.!！]|$)"
)


Embed = Callable[[Sequence[str]], "npt.NDArray[np.float32]"]
"""Texts to L2-normalised rows (`tavern_ledger.embedding.Embedder.embed`)."""


def contradicted(
    embed: Embed,
    message: str,
    clauses: Sequence[str],
    stated: Sequence[Stated],
    thresholds: Thresholds = DEFAULT,
) -> tuple[list[str], list[list[float]]]:
    """The ids of the claims a correcting `message` (cut into `clauses`) ends, and the
    similarity of each text of the correction (the whole first) to each claim. Where the model
    sees no clear match, the attribute rules may still ("I moved to Berlin" ends "I live in
    Paris")."""
    if not stated or not clauses:
        return [], []
    texts = [strip_marker(message), *clauses]
    vectors = embed([*texts, *(s.text for s in stated)])
    similarity = (vectors[: len(texts)] @ vectors[len(texts) :].T).tolist()
    chosen = targets(texts, stated, similarity, thresholds)
    return chosen or attribute_targets(message, stated), similarity


def targets(
    correction: Sequence[str],
    stated: Sequence[Stated],
    similarity: Sequence[Sequence[float]],
    thresholds: Thresholds = DEFAULT,
) -> list[str]:
    """The ids of the claims the correction ends. `correction` holds the correction's texts
    (the whole and its clauses), `similarity[i][j]` the sentence model's cosine between
    `correction[i]` and `stated[j]`."""
    if not correction or not stated:
        return []
    scored = sorted(
        ((_score(correction, s, similarity, j, thresholds), s) for j, s in enumerate(stated)),
        key=lambda pair: -pair[0],
    )
    best, first = scored[0]
    if best < thresholds.floor:
        return []
    chosen = [s for v, s in scored if v >= best - _band(s, first, thresholds)]
    texts = {normal(s.text) for s in chosen}
    rest = next((v for v, s in scored if normal(s.text) not in texts), 0.0)
    lead = min(v for v, s in scored if s in chosen) - rest
    if lead < thresholds.margin:
        return []
    return [s.id for s in chosen]


def _band(claim: Stated, best: Stated, t: Thresholds) -> float:
    """How near the best a claim must be to be ended with it: another clause of its message (a
    fact said in two clauses) or a repetition of it may be further than a claim of another
    message, which is more likely a rival than a companion."""
    if normal(claim.text) == normal(best.text):
        return t.close
    if claim.said_in and claim.said_in == best.said_in:
        return t.close
    return t.close_other


def _score(
    correction: Sequence[str],
    claim: Stated,
    similarity: Sequence[Sequence[float]],
    column: int,
    t: Thresholds,
) -> float:
    meaning = max(row[column] for row in similarity)
    value = meaning + t.words * word_overlap(correction[0], claim.text)
    if any(old and old in fold(claim.text) for old in named_old(correction[0])):
        value += t.named_old
    return value


def word_overlap(a: str, b: str) -> float:
    """The share of content words two texts hold in common (Jaccard over index terms), names
    counted at half: a shared name says who, not what, and a correction may move a fact to
    another person ("Emilia Mathen developed the app" after "Paulo Kinn developed the app")."""
    every = _jaccard(set(terms(a)), set(terms(b)))
    return (every + _jaccard(_attribute_terms(a), _attribute_terms(b))) / 2


def _jaccard(left: set[str], right: set[str]) -> float:
    return len(left & right) / max(1, len(left | right))


_NAME = re.compile(r"\b[A-Z][a-z]+(?:'s)?\b")


def _attribute_terms(text: str) -> set[str]:
    return set(terms(_NAME.sub(" ", text)))


def named_old(text: str) -> list[str]:
    """Values the text says are no longer so ("not Porto", "不是水管工"), folded."""
    found = [m.group(1) for m in _NOT_VALUE_EN.finditer(text)]
    found += [m.group(1) for m in _NOT_VALUE_ZH.finditer(text)]
    return [fold(v) for v in found if len(v) >= 2]


__all__ = ["Stated", "Thresholds", "contradicted", "is_correction", "probe_terms", "targets"]
