"""What a person's message claims: a directive to the assistant (how to answer, what to do or
never do) or a statement about themselves and their world. Directives stay in the session they
were given in; statements are facts that later sessions and chats may recall (docs/memory.md).
Rules over the text, no model; English and Chinese.
"""
# ruff: noqa: RUF001, RUF002 - full-width punctuation is part of the Chinese patterns

from __future__ import annotations

import re
from functools import lru_cache
from typing import Literal

ClaimKind = Literal["directive", "statement"]
CLAIMS_VERSION = 2
"""Bumped whenever the rules below change: stored evidence of people is then reclassified."""
DIRECTIVE_DOMAINS = frozenset({"style", "user_preference"})
"""The claim domains a person's directive is filed under (`claim_domain`)."""

_LEAD = r"^\W*(?:(?:ok(?:ay)?|so|and|also|hey|hi|oh|well|now|then|one more thing)\W+)*"
_POLITE = r"(?:(?:please|pls|kindly|just)\W+)*"
_ASKS = (
    "answer|reply|respond|speak|talk|write|use|stop|quit|avoid|keep|make|act|pretend|behave|"
    "ignore|forget|remember|call me|address me|refer to me|tell|give|show|list|explain|"
    "summari[sz]e|translate|format|describe|repeat|continue|switch|be|say|add|include|"
    "mention|focus|cite|end|start|begin|always|never|don'?t|do not|no more|from now on"
)
_IMPERATIVE = re.compile(rf"{_LEAD}{_POLITE}(?:{_ASKS})\b", re.IGNORECASE)
_DIRECTED = re.compile(
    r"\b(?:from now on|going forward|in (?:the )?future|for the rest of (?:this|our)|"
    r"you (?:must|should always|should never|have to|need to|will always|may not|can'?t|"
    r"mustn'?t|are not allowed to|are to)|"
    r"i (?:want|need|would like|'d like|'d prefer|prefer|expect|ask) you\b|"
    r"(?:make sure|be sure|remember) (?:that )?you\b|"
    r"(?:answer|reply|respond|write|speak|talk)(?: to me)? (?:only )?in (?:english|chinese|"
    r"french|german|spanish|japanese|korean|italian|russian|portuguese|[a-z]+ish)|"
    r"(?:always|never) (?:answer|reply|respond|say|mention|use|call|write|talk|speak|"
    r"address|refer|bring up|ask)|"
    r"please (?:always|never|don'?t|do not|stop|keep|use|answer|reply|respond)|\bplease\W*$)",
    re.IGNORECASE,
)
_ZH_LEAD = '^[\\s，。！、：:（(“"]*(?:好的|好|那|那么|还有|另外|对了|嗯|哦)?[\\s，。！、：:]*'
_ZH_IMPERATIVE = re.compile(
    _ZH_LEAD + "(?:请你?|麻烦你?|你(?:要|必须|应该|得|不要|别|不许|不准|不能|永远|每次|总是)|"
    "不要|别|不许|不准|禁止|务必|一定要|记得|记住|从现在(?:开始|起)|"
    "从今(?:以后|往后|天起)|用(?:中文|英文|英语|日语|法语|韩语|简体|繁体)|回答(?:时|的时候)|"
    "称呼我|叫我|改成|改为|换成|改用)"
)
_ZH_DIRECTED = re.compile(
    "(?:从现在(?:开始|起)|从今(?:以后|往后|天起)|以后(?:都|请|你|回答|说话)|今后(?:都|请|你)|"
    "你(?:必须|一定要|务必|永远|每次都|总是要|不许|不准|不能再)|"
    "我(?:要|希望|需要|想)你|请(?:你|用|务必|不要|别|始终|一直)|"
    "(?:用|以)(?:中文|英文|英语|日语|法语|韩语|简体中文|繁体中文)(?:回答|回复|说话|交流|写)|"
    "(?:应该|应当|改)用|(?<![我他她们])要用|(?<![我他她们])一定要|(?:回答|回复)(?:要|得|必须|请)|不要(?:再)?(?:提|说|回答|用|叫|称呼)|别(?:再)?(?:提|说|用|叫))"
)
_HEAD = 240
"""A directive shows itself early: only the head of a long text is looked at."""


@lru_cache(maxsize=4096)
def claim_kind(text: str) -> ClaimKind:
    """`directive` when the text tells the assistant how to behave, else `statement`."""
    head = strip_marker(text[:_HEAD])
    if _IMPERATIVE.match(head) or _DIRECTED.search(head):
        return "directive"
    if _ZH_IMPERATIVE.match(head) or _ZH_DIRECTED.search(head):
        return "directive"
    return "statement"


def is_directive(text: str) -> bool:
    return claim_kind(text) == "directive"


_MARKER = re.compile(
    r"^\W*(?:correction|update|note|fyi|actually|to be clear|just so you know)\s*[:,，：!！-]\s*"
    r"|^\s*(?:更正|纠正|补充|说明|注意|其实|更新|不对|错了)\s*[:：，,!！]?\s*",
    re.IGNORECASE,
)


def strip_marker(text: str) -> str:
    """A leading "Correction:" or "更正：" says nothing of what follows."""
    return _MARKER.sub("", text, count=1)


def claim_domain(text: str) -> str:
    """The claim domain a person's message is filed under: a directive about the answer's form
    is `style`, another directive `user_preference`, a statement `user_fact`."""
    if claim_kind(text) == "statement":
        return "user_fact"
    if _STYLE.search(text[:_HEAD]):
        return "style"
    return "user_preference"


_STYLE = re.compile(
    r"\b(?:tone|style|format|formal|informal|casual|short|shorter|brief|concise|long|longer|"
    r"detailed|verbose|emoji|markdown|bullet|language|english|chinese|french|german|spanish|"
    r"japanese|rhyme|voice|polite|sarcas\w*)\b"
    r"|语气|风格|格式|简短|简洁|详细|表情|中文|英文|英语|口吻|措辞",
    re.IGNORECASE,
)
