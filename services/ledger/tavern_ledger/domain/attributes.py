"""The rules beside the sentence model for corrections (`domain.contradiction`): the same
subject, and the same attribute read off the words, phrases, value slots and attribute classes
(where someone lives, works, …) two texts share, or the old value the correction names ("…, not
Sapporo"). Consulted when the model finds no clear match: it knows that "I moved to Berlin"
speaks of where "I live in Paris" says one lives, which sentence similarity alone does not."""
# ruff: noqa: RUF001 - full-width punctuation is part of the Chinese patterns

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from tavern_ledger.domain.text import STOPWORDS, fold, stem, terms


@dataclass(frozen=True)
class Stated:
    """An earlier claim a correction may end: its id, its text, and the message it was cut
    from (empty when it is not a claim of a message)."""

    id: str
    text: str
    said_in: str = ""


MIN_SCORE = 2.0
"""Shared evidence of the same attribute, beyond the subject, that a replacement needs."""
MARGIN = 1.0
"""How far the best match must lead the next one: a tie replaces nothing."""
NAMED_VALUE = 3.0
"""The correction names the old value ("not Sapporo", "不是水管工") and the statement holds it."""
CLASS_WEIGHT = 2.0


_STRONG_EN = re.compile(
    r"^\W*correction\b|\bno longer\b|\bany ?more\b|\b(?:switched|moved|relocated) (?:to|from)\b"
    r"|\bchanged (?:my|his|her|their|our|the|its|to|jobs?|roles?|teams?|schools?)\b"
    r"|\bnot\b.{1,40}\b(?:but|now)\b|\bi meant\b",
    re.IGNORECASE,
)
_STRONG_ZH = re.compile(
    "更正|纠正|不再|改成|改为|改到|换成|换到|搬到|搬去|搬回|不对|错了|说错|不是.{1,12}而是"
)
_NEWS = re.compile(
    r"\b(?:yesterday|today|tonight|this (?:morning|afternoon|evening)|last (?:night|weekend)|"
    r"just now)\b|昨天|今天|前天|刚才|今早|昨晚|今晚",
    re.IGNORECASE,
)
_QUESTION = re.compile(r"[?？]\s*$|[吗呢嘛]\s*[。.!！]?\s*$")


def targets(correction: str, stated: Sequence[Stated]) -> list[str]:
    """The ids of the statements `correction` replaces: the clear best match (and its exact
    repetitions), or none. A question replaces nothing; a correction said only with a soft
    marker ("Actually, …", "其实…", which also open news) and telling of a day's event must
    name the attribute or the old value it replaces."""
    if _QUESTION.search(correction.strip()) or not _one_claim(correction):
        return []
    claim = parse(correction)
    soft = not (_STRONG_EN.search(correction) or _STRONG_ZH.search(correction))
    about = [(s, parse(s.text)) for s in stated if s.text.strip() and _one_claim(s.text)]
    about = [(s, c) for s, c in about if agrees(claim.subject, c.subject)]
    weights = _rarity([c for _, c in about])
    scored = sorted(((score(claim, c, weights), s) for s, c in about), key=lambda pair: -pair[0])
    if not scored or scored[0][0] < MIN_SCORE:
        return []
    best_score, best = scored[0]
    if soft and _NEWS.search(correction) and not _restates(claim, parse(best.text)):
        return []  # "Actually, I went sailing from the harbour yesterday" is news
    same = normal(best.text)
    runner_up = next((v for v, s in scored[1:] if normal(s.text) != same), 0.0)
    if best_score - runner_up < MARGIN:
        return []
    return [s.id for v, s in scored if v == best_score and normal(s.text) == same]


@dataclass(frozen=True)
class Claim:
    """What a text says, as matching needs it."""

    subject: frozenset[str]
    """`self`, a relation of the speaker (`kin:sister`), names (English) or leading characters
    (Chinese) of whom it is about; `pronoun` when it only says "she" or "他"."""
    features: frozenset[str]
    """Content words, phrases, value slots, names and attribute classes, subject excluded."""
    named_old: tuple[str, ...] = ()
    """Values the text says are no longer so ("not Max", "不是萨博")."""
    body: str = ""


MAX_CLAIM_CHARS = 200
"""A correction is said in a sentence or two, and only a statement that short is replaced: a
long message holds many facts, and superseding it would take the others with it."""
_SENTENCE_END = re.compile(r"[.!?。！？]+(?:\s|$)")


def _one_claim(text: str) -> bool:
    body = text.strip()
    return len(body) <= MAX_CLAIM_CHARS and len(_SENTENCE_END.findall(body)) <= 2


def _restates(correction: Claim, statement: Claim) -> bool:
    """The correction speaks of the statement's attribute (a shared attribute class) or names
    the value it had."""
    shared = correction.features & statement.features
    if any(f.startswith("c:") and f not in _GENERIC for f in shared):
        return True
    return any(old and old in statement.body for old in correction.named_old)


def agrees(correction: frozenset[str], statement: frozenset[str]) -> bool:
    """The same subject; a correction that only says "she" may speak of anyone but the
    speaker."""
    if correction & statement:
        return True
    return "pronoun" in correction and "self" not in statement


def _rarity(claims: Sequence[Claim]) -> dict[str, float]:
    """A feature held by few of the statements about the subject tells more
    (1 + ln((N + 1) / df): a feature of the only statement still counts more than one)."""
    counts: dict[str, int] = {}
    for claim in claims:
        for feature in claim.features:
            counts[feature] = counts.get(feature, 0) + 1
    total = len(claims) + 1
    return {f: 1.0 + math.log(total / n) for f, n in counts.items()}


def score(correction: Claim, statement: Claim, rarity: Mapping[str, float] | None = None) -> float:
    """How surely `correction` speaks of the same attribute as `statement` (same subject)."""
    shared = correction.features & statement.features
    weights = rarity or {}
    value = sum(_BASE.get(f[:2], 1.0) * weights.get(f, 1.0) for f in shared)
    if any(old and old in statement.body for old in correction.named_old):
        return value + NAMED_VALUE
    if shared and shared <= _GENERIC:
        return 0.0  # a place or a role alone ("in Madrid" and "in Seville") is not an attribute
    return value


_BASE = {"c:": 1.5, "n:": 1.5}
_GENERIC = frozenset({"c:place", "c:role", "c:day"})


@lru_cache(maxsize=8192)
def parse(text: str) -> Claim:
    body = _strip(fold(text))
    if _CJK.search(body):
        return _parse_zh(body)
    return _parse_en(text, body)


# --- English ------------------------------------------------------------------------------------

_EN_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_EN_NAME = re.compile(r"\b[A-Z][a-z]+(?:'s)?\b")
_NUMBER = re.compile(r"\d+(?:st|nd|rd|th|s|k|km|kg|am|pm)?")
_PLACE = re.compile(r"\b(?:in|to|from) (?:the )?[A-Z][a-z]+")
"""A place named as the value ("in Berlin", "to Munich")."""
_EMPLOYER = re.compile(
    r"\b(?:works? (?:at|for)|(?:engineer|designer|manager|nurse|doctor|"
    r"teacher|lawyer|developer|analyst|assistant|chef) at|joined) [A-Z]"
)
"""An employer named as the value ("works at Microsoft", "an engineer at Google")."""
_SELF_EN = frozenset({"i", "i'm", "i've", "i'd", "i'll", "my", "me", "mine", "myself", "we", "our"})
_NOT_NAMES = frozenset(
    [
        "actually",
        "correction",
        "update",
        "sorry",
        "wait",
        "no",
        "not",
        "the",
        "my",
        "it",
        "and",
        "but",
        "she",
        "he",
        "they",
        "we",
        "i",
        "now",
        "instead",
        "also",
        "oh",
        "well",
        "just",
        "this",
        "that",
        "there",
        "our",
        "his",
        "her",
        "their",
        "its",
        "yes",
        "yesterday",
        "today",
        "tomorrow",
        "last",
        "next",
        "every",
        "please",
        "hey",
        "hi",
        "ok",
        "okay",
        "so",
        "in",
        "at",
        "on",
        "for",
        "when",
        "if",
        "after",
        "before",
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    ]
)
_CORRECTION_WORDS = frozenset(
    [
        "actually",
        "correction",
        "update",
        "now",
        "no",
        "longer",
        "any",
        "more",
        "anymore",
        "not",
        "instead",
        "changed",
        "change",
        "switched",
        "sorry",
        "wait",
        "meant",
        "really",
        "still",
        "already",
        "since",
        "last",
        "ago",
        "recently",
        "these",
        "days",
    ]
)
_EN_NOT = re.compile(
    r"\b(?:not|n't|no longer|instead of)\s+(?:a |an |the |at |in |on |called )?([a-z0-9]+)"
    r"|\b([a-z0-9]+) (?:was|is) the old one\b"
)
_CLASSES_EN: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern))
    for name, pattern in (
        (
            "residence",
            r"\b(?:live|lives|living|lived) in\b|\bmoved (?:to|back to|from|house)\b|"
            r"\brelocated\b|\bbased in\b|\bmy (?:home|flat|apartment|house) is in\b",
        ),
        ("origin", r"\bhometown\b|\b(?:is|am|are|comes?|come) from\b|\bgrew up in\b|\bborn in\b"),
        (
            "job",
            r"\bworks? as\b|\bjobs?\b|"
            r"\bprofession\b|\bcareer\b|\bcoach(?:es)?\b|\bteach(?:es)?\b|\bfreelanc\w*|"
            r"\bintern(?:ship)?\b|\bappointed\b|\bpromoted\b|\bshifts?\b|"
            r"\b(?:is|am|'m|'s|are|now|became) (?:a|an) [a-z-]+(?: [a-z-]+)? (?:at|for)\b",
        ),
        (
            "employer",
            r"\bworks? (?:at|for)\b|\bemployer\b|\bcompan(?:y|ies)\b|\bfirm\b|\bagency\b|"
            r"\bhired\b|\bjoined\b| at (?:a |an |the )?[a-z]+(?: [a-z]+)? now\b",
        ),
        ("role", r"\b(?:is|am|'m|'s|are|now|became|become) (?:a|an) "),
        ("workplace", r"\boffices?\b|\bwork(?:s|ing)? from\b|\bworkplace\b|\bco-working\b"),
        ("department", r"\bward\b|\bdepartment\b|\bunit\b"),
        ("day", r"\b(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b"),
        ("age", r"\b(?:years? old|aged?|turned|turns)\b"),
        ("birthday", r"\bbirthday\b|\bborn on\b"),
        ("name", r"\b(?:called|named|name is)\b"),
        ("favourite", r"\bfavou?rite\b"),
        ("vehicle", r"\bdrives?\b|\bdriving (?:a|an)\b|\bcar is\b"),
        ("price", r"[£$€¥]\s?\d|\b\d+ (?:pounds|dollars|euros|a month|per month|an hour)\b"),
        ("count", r"\b(?:has|have|had) (?:\d+|one|two|three|four|five|six|seven|eight|nine|ten)\b"),
        (
            "schedule",
            r"\b(?:on|every) (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?\b",
        ),
        ("diet", r"\bvegetarian\b|\bvegan\b|\beat(?:s)? meat\b|\bdiet\b"),
        ("partner", r"\b(?:husband|wife|boyfriend|girlfriend|partner|fianc[eé]e?)\b"),
        ("school", r"\bstud(?:y|ies|ied|ying)\b|\bschool\b|\buniversity\b|\bcollege\b"),
    )
)


_KIN_EN = (
    "mother|mum|mom|father|dad|sister|brother|son|daughter|wife|husband|partner|boyfriend|"
    "girlfriend|grandma|grandmother|granny|grandpa|grandfather|aunt|uncle|cousin|niece|nephew|"
    "friend|best friend|boss|flatmate|roommate|neighbour|neighbor|colleague|kids|children|"
    "parents|family|dog|cat"
)
_MY_KIN = re.compile(
    rf"^(?:my|our) (?:(?:older|younger|little|big|eldest|oldest|youngest) )?({_KIN_EN})\b"
)
_ANY_KIN = re.compile(rf"\b(?:my|our) ({_KIN_EN})\b")
_KIN_NAME = {k: "kin:" + k for k in _KIN_EN.split("|") if " " not in k}
"""A relation written as a name ("Dad's allotment") is that relation."""
_PRONOUN_EN = frozenset({"he", "she", "they", "he's", "she's", "they're", "his", "her", "their"})


def _parse_en(original: str, body: str) -> Claim:
    words = [w.removesuffix("'s") for w in _EN_WORD.findall(body)]
    names = _names(original)
    subject = _subject_en(body, words, names)
    lead = {n for n in names if n in subject or _KIN_NAME.get(n) in subject}
    relations = {w for s in subject if s.startswith("kin:") for w in s[4:].split()}
    excluded = lead | relations | _SELF_EN | _PRONOUN_EN
    tokens = ["#" if _NUMBER.fullmatch(w) else w for w in words if w not in _CORRECTION_WORDS]
    features: set[str] = set()
    for index, word in enumerate(tokens):
        if word not in STOPWORDS and word not in excluded:
            features.add("u:" + stem(word))
        if index:
            pair = (tokens[index - 1], word)
            if any(p not in STOPWORDS and p not in excluded for p in pair):
                features.add("b:" + " ".join(stem(p) for p in pair))
    features |= {"n:" + n for n in names if n not in lead}
    features |= {"c:" + name for name, pattern in _CLASSES_EN if pattern.search(body)}
    if _PLACE.search(original):
        features.add("c:place")
    if _EMPLOYER.search(original):
        features.add("c:employer")
    named = tuple(m.group(1) or m.group(2) for m in _EN_NOT.finditer(body))
    return Claim(frozenset(subject), frozenset(features), named, body)


def _subject_en(body: str, words: Sequence[str], names: Sequence[str]) -> set[str]:
    """Whom the text is about: a relation of the speaker ("my sister"), the name it opens
    with, the speaker, or only a pronoun."""
    kin = _MY_KIN.match(body)
    subject = {"kin:" + kin.group(1)} if kin else set()
    opening = kin.end() + 1 if kin else 0
    if names and body.startswith(names[0], opening):
        subject.add(_KIN_NAME.get(names[0], names[0]))
    if subject:
        return subject
    if words and words[0] in _SELF_EN:
        return {"self"} | {"kin:" + k for k in _ANY_KIN.findall(body)}
    if words and words[0] in _PRONOUN_EN:
        return {"pronoun"}
    return {"self"}


def _names(original: str) -> list[str]:
    found = []
    for match in _EN_NAME.finditer(original):
        name = match.group(0).removesuffix("'s").lower()
        if name not in _NOT_NAMES:
            found.append(name)
    return found


# --- Chinese ------------------------------------------------------------------------------------

_CJK = re.compile("[\u3400-\u4dbf\u4e00-\u9fff]")
_ZH_BREAKS = re.compile(
    "更正|纠正|其实|现在|已经|不再|改成了|改成|改为了|改为|改到|换成|换到|不对|错了|说错了|"
    "了|吧|呢|啊|呀|的话|而是|也|都|又|还|就|才|是"
)
_ZH_RUN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff#]+")
_ZH_NOT = re.compile(
    "(?:不是|不叫|不在|不住|并非|而不是)([\u3400-\u4dbf\u4e00-\u9fff0-9]{1,6}?)(?:了|的|[，。,.!！；;]|$)"
)
_SELF_ZH = ("我", "咱")
_LATIN = re.compile(r"[a-z][a-z0-9]+|[0-9]+[a-z]+")
_CLASSES_ZH: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern))
    for name, pattern in (
        ("residence", "住|搬到|搬去|搬回|搬家|定居|安家|租了"),
        ("origin", "老家|家乡|来自|出生在|是.{1,4}人|长大"),
        (
            "job",
            "当|做.{0,6}(?:师|员|工|经理|士)|职业|职位|工作|上班|实习|带.{0,8}队|护士|医生|老师",
        ),
        ("employer", "在.{1,10}(?:公司|工作|上班|任职|当|做)|换公司|跳槽|公司|单位|医院"),
        ("department", "[\u4e00-\u9fff]{1,3}科"),
        ("shift", "[夜白早晚中]班"),
        ("age", "岁"),
        ("birthday", "生日|出生于"),
        ("name", "叫|名字"),
        ("favourite", "最喜欢|最爱"),
        ("vehicle", "开的是|开车|开.{0,3}车"),
        ("price", "#元|#块|#万|月薪|工资|房租|价格"),
        ("count", "有#|有[一二两三四五六七八九十]+个"),
        ("schedule", "周[一二三四五六日天]|星期[一二三四五六日天]|每周|每天"),
        ("diet", "吃素|素食|吃肉"),
        ("partner", "老公|老婆|丈夫|妻子|男朋友|女朋友|对象|谈恋爱|分手"),
        ("school", "上学|读|大学|学校|学的是|念书|专业"),
    )
)


def _parse_zh(body: str) -> Claim:
    slotted = re.sub("[0-9]+", "#", body)
    named = tuple(m.group(1) for m in _ZH_NOT.finditer(body) if m.group(1))
    plain = _ZH_BREAKS.sub(" ", slotted)
    subject = _zh_subject(plain)
    features: set[str] = set()
    for run in _ZH_RUN.findall(plain):
        for index in range(len(run) - 1):
            pair = run[index : index + 2]
            if not _is_subject(pair, subject):
                features.add("z:" + pair)
    features |= {"c:" + name for name, pattern in _CLASSES_ZH if pattern.search(slotted)}
    features |= {"u:" + w for w in _LATIN.findall(body)}
    return Claim(frozenset(subject), frozenset(features), named, slotted)


_KIN_ZH = re.compile(
    "^(?:我|咱)(?:的)?(大|二|小)?(妈妈|妈|爸爸|爸|姐姐|妹妹|哥哥|弟弟|女儿|儿子|老公|老婆|丈夫|妻子|"
    "外婆|外公|奶奶|爷爷|姥姥|姥爷|表哥|表姐|表妹|表弟|堂哥|堂姐|男朋友|女朋友|朋友|同事|老板|室友|"
    "邻居|孩子|爸妈|父母|家人|狗|猫)"
)


def _zh_subject(plain: str) -> set[str]:
    """`self` for a text about the speaker, a relation of theirs (`kin:姐姐`), `pronoun` for
    他/她, else its first two characters (a name, a title)."""
    head = "".join(_ZH_RUN.findall(plain))
    if not head:
        return {"self"}
    kin = _KIN_ZH.match(head)
    if kin:
        return {"kin:" + kin.group(2), (kin.group(1) or "") + kin.group(2)}
    if head.startswith(_SELF_ZH) or any(ch in head[:4] for ch in _SELF_ZH):
        return {"self"}
    if head.startswith(("他", "她", "他们", "她们")):
        return {"pronoun"}
    return {head[:2]}


def _is_subject(pair: str, subject: Iterable[str]) -> bool:
    """A pair holding a character of the subject ("王芳的" gives "芳的") says who, not what."""
    held = set("".join(s for s in subject if ":" not in s and s not in ("self", "pronoun")))
    held |= set(_SELF_ZH) | {"他", "她"}
    return any(ch in held for ch in pair)


# --- both -----------------------------------------------------------------------------------------

_PROBES = {
    "residence": "live lives lived living moved based home flat 住在 住 搬到 定居",
    "origin": "hometown from grew born 老家 家乡 来自 出生",
    "job": "work works job coach teach nurse freelance intern 工作 上班 当 职业 职位 实习",
    "employer": "works company firm agency employer 公司 单位 医院",
    "workplace": "office offices working 办公",
    "age": "old age aged turned 岁",
    "birthday": "birthday born 生日",
    "name": "called named name 叫 名字",
    "favourite": "favourite favorite 最喜欢 最爱",
    "vehicle": "drive drives car 开车",
    "partner": "husband wife boyfriend girlfriend partner 老公 老婆 男朋友 女朋友 恋爱",
    "school": "study studies school university college 读 大学 学校 专业",
    "diet": "vegetarian vegan meat diet 吃素 素食 吃肉",
}


def probe_terms(text: str) -> list[str]:
    """The index terms that find statements a correction may replace: its own, and the
    usual words of the attributes it speaks of ("moved" finds "I live in Paris")."""
    claim = parse(text)
    words = " ".join(_PROBES.get(f[2:], "") for f in claim.features if f.startswith("c:"))
    return list(dict.fromkeys(terms(text) + terms(words)))


_LEADING = re.compile(
    r"^\W*(?:(?:correction|actually|update|to be clear|sorry|no wait|wait|oh|well)\b\W*)+"
    r"|^\W*(?:(?:更正|纠正|其实|不对|说错了|错了)[\W，。：！、]*)+"
)


def _strip(body: str) -> str:
    return _LEADING.sub("", body, count=1)


def normal(text: str) -> str:
    """Folded, with runs of space as one."""
    return " ".join(fold(text).split())
