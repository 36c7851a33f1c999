"""A person's message cut into atomic claims: a sentence or a clause each, with what it is (a
fact, a preference, a directive to the assistant, a question, small talk, a correction) and its
subject made explicit where the clause only says "she" or "他" of someone the clause before
named. Recall ranks claims; a correction ends the claims it contradicts, not whole messages.
Structure (sentence and clause boundaries, the turn of a question) is read from punctuation and
function words; no phrasing of a fact is listed. English and Chinese; no model, no IO.
"""
# ruff: noqa: RUF001 - full-width punctuation is part of the Chinese patterns

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from tavern_ledger.domain.claims import claim_kind, strip_marker

Kind = Literal["fact", "preference", "directive", "question", "chatter", "correction"]
KINDS: tuple[str, ...] = ("fact", "preference", "directive", "question", "chatter", "correction")
MESSAGE = "message"
"""The kind filed on the whole message a person said: kept as evidence, never recalled."""
HELD = frozenset({MESSAGE, "question", "chatter"})
"""Kinds kept as evidence and never recalled as memory."""
UNINDEXED = frozenset({MESSAGE, "chatter"})
"""Kinds without postings in the lexical index. A question has them: recall finds the answer
next to it through it, and never injects the question itself."""
FACTUAL = frozenset({"fact", "preference", "correction"})
"""Kinds a later correction may end."""
SEGMENTS_VERSION = 1
"""Bumped whenever the cut or the kinds change: stored messages are then cut again."""
MAX_CLAIMS = 24
"""A long message keeps its first claims; the message itself keeps all of its text."""
MIN_CHARS = 2


@dataclass(frozen=True)
class Segment:
    text: str
    """The claim as filed: the clause, its subject named when it said only a pronoun."""
    kind: Kind
    said: str
    """The clause as the person said it."""


_SENTENCES = re.compile(
    r"(?<!\b[A-Z]\.)(?<!\bJr\.)(?<!\bSr\.)(?<!\bMr\.)(?<!\bMs\.)(?<!\bDr\.)(?<!\bSt\.)"
    r"(?<!\bMrs\.)(?<!\bvs\.)(?<!\betc\.)(?<=[.!?…;])\s+"
    r"|(?<=[。！？；])|\n+"
)
_PRONOUN_EN = r"(?:i|we|he|she|they|it|you|my|his|her|our|their|its|this|that|there)"
_CLAUSES_EN = re.compile(
    rf"\s*(?:[,;]\s*(?:and|but|while|whereas|so|though|although)\s+(?=[A-Z]|{_PRONOUN_EN}\b)"
    rf"|;\s*|\s+(?:but|while|whereas|although)\s+(?=[A-Z]|{_PRONOUN_EN}\b)"
    rf"|\s+and\s+(?={_PRONOUN_EN}\s))",
    re.IGNORECASE,
)
_CLAUSES_ZH = re.compile(
    "[，,]\\s*(?:而且|并且|但是|但|不过|可是|同时|而)?(?=(?:我|他|她|它|我们|他们|她们|你)(?![们的]?[的]))"
    "|[，,]\\s*(?:而且|并且|但是|不过|可是|同时)"
)
_LEAD_PRONOUN_EN = re.compile(r"^(she|he|they|it)\b(\s+)", re.IGNORECASE)
_LEAD_PRONOUN_ZH = re.compile("^(她们|他们|她|他|它)")
_SUBJECT_EN = re.compile(
    r"^\W*((?:(?:[Mm]y|[Oo]ur|[Hh]is|[Hh]er|[Tt]heir|[Tt]he)\s+(?:[a-z]+\s+){0,2}?[a-z]+?)"
    r"|(?:[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*){0,3}))(?:'s\s+name\b|'s\b|\s+(?:is|are|was|were|has|"
    r"have|had|got|will|would|can|does|did|[a-z]+(?:s|ed))\b)"
)
_SUBJECT_ZH = re.compile(
    "^((?:我|你|他|她)(?:的)?(?:[\u4e00-\u9fff]{1,3}?)|[\u4e00-\u9fff]{2,4}?)"
    "(?:叫|住|是|在|有|的名字|喜欢|养)"
)
_QUESTION_EN = re.compile(
    r"^\W*(?:what|where|when|who|whom|whose|why|how|which|do|does|did|is|are|was|were|can|could|"
    r"would|will|should|shall|have|has|may|might|am)\b.*(?<![.!])$",
    re.IGNORECASE,
)
_QUESTION_END = re.compile(r"[?？]\W*$|[吗呢么嘛]\W*$")
_CHATTER = re.compile(
    r"^\W*(?:(?:hi|hello|hey|yo|hiya|thanks|thank you|thx|ty|ok|okay|sure|great|cool|nice|"
    r"wow|lol|haha+|hmm+|yes|yeah|yep|no|nope|bye|goodbye|see you|good (?:morning|night|evening|"
    r"afternoon)|sounds good|got it|awesome|perfect|alright|oh|ah|well|please|sorry|welcome|"
    r"you too|me too|indeed|right|exactly|of course|no problem|np|cheers)\W*)+$"
    "|^\\W*(?:你好|您好|嗨|哈喽|谢谢|多谢|好的|好吧|好|嗯+|哦+|哈哈+|再见|拜拜|早上好|晚上好|晚安|"
    "没问题|对|是的|不客气|太好了|可以)\\W*$",
    re.IGNORECASE,
)
_PREFERENCE = re.compile(
    r"\b(?:i|we)\s+(?:really\s+|absolutely\s+|just\s+)?(?:love|like|enjoy|adore|prefer|hate|"
    r"dislike|detest|can't stand|cannot stand)\b|\bmy\s+favou?rite\b"
    "|我(?:很|特别|最|非常)?(?:喜欢|爱|讨厌|不喜欢|偏爱)|我最爱",
    re.IGNORECASE,
)


def segments(text: str, correction: bool = False) -> tuple[Segment, ...]:
    """The claims of one message, in order. In a message that corrects something
    (`correction`), every clause that states something is a correction."""
    return _segments(text, correction)


@lru_cache(maxsize=8192)
def _segments(text: str, correction: bool) -> tuple[Segment, ...]:
    found: list[Segment] = []
    previous_subject = ""
    marker = _marker(text)
    for n, clause in enumerate(clauses(text)[:MAX_CLAIMS]):
        resolved = _resolve(clause, previous_subject)
        kind = kind_of(clause, correction)
        if n == 0 and kind == "directive" and marker:
            # A directive keeps how it was introduced ("更正: 用四个空格"): the rules channel
            # reads an explicit "Correction:" or "记住:" as asking for a rule.
            resolved = clause = marker + clause
        found.append(Segment(resolved, kind, clause))
        previous_subject = subject_of(resolved) or previous_subject
    return tuple(found)


def _marker(text: str) -> str:
    """The leading "Correction:" or "更正:" of a message, as said (empty if none)."""
    body = text.strip()
    return body[: len(body) - len(strip_marker(body))]


def clauses(text: str) -> list[str]:
    """Sentences, then clauses that open with a subject of their own."""
    body = strip_marker(text.strip())
    found: list[str] = []
    for sentence in _SENTENCES.split(body):
        for part in _split_clauses(sentence):
            cleaned = part.strip(" \t,，;；")
            if len(cleaned) >= MIN_CHARS:
                found.append(cleaned)
    return found


def _split_clauses(sentence: str) -> list[str]:
    """Cut where a clause opens with a subject of its own, only where both sides are clauses
    (three words or more, or four characters in Chinese): "English, French, and Mandarin" is
    one list, not two claims."""
    cjk = _has_cjk(sentence)
    pattern = _CLAUSES_ZH if cjk else _CLAUSES_EN
    parts: list[str] = []
    start = 0
    for cut in pattern.finditer(sentence):
        head, tail = sentence[start : cut.start()], sentence[cut.end() :]
        if _clause_sized(head, cjk) and _clause_sized(_until_next(tail, pattern), cjk):
            parts.append(head)
            start = cut.end()
    parts.append(sentence[start:])
    return [p for p in parts if p.strip()]


def _until_next(text: str, pattern: re.Pattern[str]) -> str:
    found = pattern.search(text)
    return text[: found.start()] if found else text


def _clause_sized(text: str, cjk: bool) -> bool:
    """Long enough to be a clause, and not a list of names ("Anna Berg, Tom Lee")."""
    if cjk:
        return len(_CJK.findall(text)) >= 4
    words = [w for w in re.split(r"[\s,]+", text) if w and w.lower() not in _LIST_WORDS]
    return len(words) >= 3 and not all(w[:1].isupper() for w in words)


_LIST_WORDS = frozenset({"and", "all", "three", "both", "two", "four", "of", "them"})


def kind_of(clause: str, correction: bool) -> Kind:
    """What one clause is; a clause of a correcting message that states something corrects."""
    if _QUESTION_END.search(clause) or (not _has_cjk(clause) and _QUESTION_EN.match(clause)):
        return "question"
    if _CHATTER.match(clause):
        return "chatter"
    if claim_kind(clause) == "directive":
        return "directive"
    if correction:
        return "correction"
    return "preference" if _PREFERENCE.search(clause) else "fact"


def subject_of(clause: str) -> str:
    """Whom a clause is about when it names them first ("My sister", "Lena", "我妹妹")."""
    if _has_cjk(clause):
        zh = _SUBJECT_ZH.match(clause)
        return zh.group(1) if zh else ""
    en = _SUBJECT_EN.match(clause)
    if en is None:
        return ""
    subject = en.group(1).strip()
    return "" if subject.lower() in {"i", "we", "you", "it", "this", "that", "there"} else subject


def _resolve(clause: str, subject: str) -> str:
    """`she lives in Porto` after `My sister's name is Lena`: `My sister lives in Porto`."""
    if not subject:
        return clause
    if _has_cjk(clause):
        return _LEAD_PRONOUN_ZH.sub(subject, clause, count=1) if _has_cjk(subject) else clause
    if _has_cjk(subject) or not _LEAD_PRONOUN_EN.match(clause):
        return clause
    return _LEAD_PRONOUN_EN.sub(lambda m: subject + m.group(2), clause, count=1)


_CJK = re.compile("[\u3400-\u9fff]")


def _has_cjk(text: str) -> bool:
    return bool(_CJK.search(text))
