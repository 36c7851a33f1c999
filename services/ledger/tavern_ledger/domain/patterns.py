"""What the write gate looks for: credentials, prompt injection (English and Chinese) and private
data (emails, phone numbers, Luhn-valid card numbers, national id shapes, checked IBANs, passport
numbers, dates of birth and street addresses).

Each finder returns named findings; the gate decides what to do with them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from tavern_runtime import secretscan
from tavern_runtime.secretscan import any_case, named, prefilter

# Credentials (never stored) are found by `tavern_runtime.secretscan`, shared with the loop,
# which scrubs provider errors with the same patterns before they reach the session log.
SECRET_PATTERNS = secretscan.SECRET_PATTERNS
SECRET_PREFILTER = secretscan.SECRET_PREFILTER
case_variants = secretscan.case_variants
find_secrets = secretscan.find_secrets
normalise = secretscan.normalise
variants = secretscan.variants

_A = re.ASCII  # `\b` and `\w` as in JavaScript: a CJK letter next to a key is still a boundary

# --- prompt injection: quarantined ----------------------------------------------------------------

_EARLIER = r"(?:previous|prior|above|earlier|old|preceding|original)"
_RULES = (
    r"(?:instructions?|prompts?|rules?|preferences?|directives?|guidelines?|policies?"
    r"|context|settings?|messages?)"
)
_FILLER = r"(?:(?:all|the|any|your|of|my|these|those)\s+){0,3}"
_ZH_EARLIER = r"(?:之前|以上|上面|上述|前面|先前|此前|原来|原有|所有|全部|一切)"
_ZH_RULES = r"(?:指令|指示|规则|提示词|提示|设定|要求|约束|限制|命令|规定)"

INJECTION_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "ignore_previous",
        re.compile(rf"\b(?:ignore|disregard|forget|skip)\s+{_FILLER}{_EARLIER}\s+{_RULES}", re.I),
    ),
    (
        "ignore_everything",
        re.compile(r"\b(?:ignore|disregard|forget)\s+(?:all|everything)\s+(?:you|i)\s", re.I),
    ),
    (
        "unrestricted_persona",
        re.compile(
            r"\byou\s+are\s+now\s+(?:a\s+|an\s+)?[^\n]{0,40}without\s+(?:any\s+)?"
            r"(?:restrictions?|limitations?|rules?|filters?)",
            re.I,
        ),
    ),
    ("system_prompt", re.compile(r"\bsystem\s+prompt\s*:", re.I)),
    ("must_override", re.compile(r"\byou\s+must\s+(?:ignore|forget|override|disregard)", re.I)),
    (
        "override_instructions",
        re.compile(rf"\boverride\s+{_FILLER}(?:system\s+prompt|{_RULES})", re.I),
    ),
    (
        "reveal_system_prompt",
        re.compile(r"\b(?:reveal|print|show|repeat)\s+(?:your|the)\s+system\s+prompt", re.I),
    ),
    (
        "new_instructions",
        re.compile(r"\b(?:new|updated|real)\s+(?:system\s+)?instructions?\s*:", re.I),
    ),
    (
        "ignore_previous_zh",
        re.compile(
            rf"(?:忽略|无视|忽视|不要理会|别管|抛开|丢掉)掉?\s*{_ZH_EARLIER}的?\s*(?:所有|全部)?的?\s*{_ZH_RULES}"
        ),
    ),
    (
        "forget_previous_zh",
        re.compile(
            rf"忘[记掉](?:{_ZH_EARLIER}|你(?:{_ZH_EARLIER})?)的?\s*(?:所有|全部)?的?\s*(?:{_ZH_RULES}|身份)"
        ),
    ),
    (
        "unrestricted_persona_zh",
        re.compile(r"你现在是.{0,30}(?:没有|不受|无|不再有)(?:任何)?(?:限制|约束|规则|审查)"),
    ),
    ("system_prompt_zh", re.compile(r"系统提示词?\s*:")),
    ("must_override_zh", re.compile(r"你必须(?:忽略|忘记|无视|覆盖|违反)")),
    (
        "from_now_on_zh",
        re.compile(r"从现在(?:开始|起).{0,12}(?:忽略|无视|不再遵守|不用遵守)"),
    ),
    (
        "reveal_system_prompt_zh",
        re.compile(r"(?:泄露|输出|显示|打印|告诉我)(?:你的)?(?:系统提示词?|初始指令|原始指令)"),
    ),
)

INJECTION_PREFILTER = prefilter(
    [
        *any_case(
            (
                r"ignore\s",  # ignore_previous, ignore_everything
                r"disregard\s",
                r"forget\s",
                r"skip\s",
                r"you\s+are\s+now\s",  # unrestricted_persona
                r"system\s+prompt",  # system_prompt, reveal_system_prompt, override_instructions
                r"you\s+must\s",  # must_override
                r"override\s",  # override_instructions
                r"new\s",  # new_instructions
                r"updated\s",
                r"real\s",
            ),
            "i",
        ),
        *("忽略", "无视", "忽视", "不要理会", "别管", "抛开", "丢掉"),  # ignore_previous_zh
        "忘[记掉]",  # forget_previous_zh
        "你现在是",  # unrestricted_persona_zh
        "系统提示",  # system_prompt_zh, reveal_system_prompt_zh
        "你必须",  # must_override_zh
        "从现在",  # from_now_on_zh
        "初始指令",  # reveal_system_prompt_zh
        "原始指令",
    ]
)


def find_injections(text: str, folded: str | None = None) -> list[str]:
    """Names of the prompt-injection patterns found in `text` (or in its normalised form)."""
    return named(INJECTION_PATTERNS, INJECTION_PREFILTER, variants(text, folded))


# --- private data: quarantined or redacted --------------------------------------------------------


@dataclass(frozen=True)
class Span:
    """One piece of private data in a text: its kind and where it is."""

    kind: str
    start: int
    end: int


_EMAIL = re.compile(
    r"[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63})*\.[A-Za-z]{2,24}", _A
)
_CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])", _A)
_CN_ID = re.compile(
    r"(?<!\d)\d{6}(?:19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])\d{3}[\dXx](?![\dA-Za-z])",
    _A,
)
_US_SSN = re.compile(r"(?<![\d-])(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?![\d-])", _A)
_PHONE_PATTERNS = (
    re.compile(r"(?<![\d+])(?:\+?86[ -]?)?1[3-9]\d{9}(?!\d)", _A),
    re.compile(r"(?<![\w+])\+\d{1,3}[ .-]?\(?\d{1,4}\)?(?:[ .-]?\d{2,4}){2,4}(?!\d)", _A),
    re.compile(r"(?<![\w-])\(?\d{3}\)?[ .-]\d{3}[ .-]\d{4}(?![\d-])", _A),
)
_IBAN = re.compile(
    r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?(?![A-Za-z0-9])", _A
)
_PASSPORT = re.compile(
    r"(?:passport|护照)(?:\s*(?:no\.?|number|num\.?|#|号码|号))?\s*(?:is|:|\uff1a|#)?\s*"
    r"(?P<value>[A-Z]{0,2}\d{2}[A-Z0-9]{4,7})(?![A-Za-z0-9])",
    re.IGNORECASE | _A,
)
_DATE = (
    r"(?:(?:19|20)\d{2}[-/.](?:0?[1-9]|1[0-2])[-/.](?:0?[1-9]|[12]\d|3[01])"
    r"|(?:0?[1-9]|[12]\d|3[01])[-/.](?:0?[1-9]|1[0-2])[-/.](?:19|20)\d{2}"
    r"|(?:19|20)\d{2}年(?:0?[1-9]|1[0-2])月(?:0?[1-9]|[12]\d|3[01])日"
    r"|(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]*\.? (?:0?[1-9]|[12]\d|3[01])"
    r"(?:st|nd|rd|th)?,? (?:19|20)\d{2}"
    r"|(?:0?[1-9]|[12]\d|3[01])(?:st|nd|rd|th)? (?:of )?(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept"
    r"|Oct|Nov|Dec)[a-z]*,? (?:19|20)\d{2})(?!\d)"
)
_BIRTH_DATE = re.compile(
    r"(?:\bborn\b|\bbirthday\b|date of birth|\bd\.?o\.?b\b|出生|生日)[^\n.;。]{0,24}?"
    rf"(?P<value>{_DATE})",
    re.IGNORECASE | _A,
)
_STREET = re.compile(
    r"(?<![\w-])\d{1,5}[A-Za-z]?,? (?:[A-Z][a-z']+ ){1,3}"
    r"(?:Street|St|Road|Rd|Avenue|Ave|Way|Lane|Ln|Drive|Dr|Boulevard|Blvd|Court|Ct|Place|Pl"
    r"|Terrace|Crescent|Close|Square|Sq|Parkway|Highway|Hwy|Strasse|Straße|Rue)\b\.?",
    _A,
)
_CN_STREET = re.compile(
    r"[\u4e00-\u9fff]{1,6}(?:路|街|道|巷|弄)\d{1,5}(?:号|號)(?:\d{1,5}(?:室|楼))?", _A
)
_IBAN_LENGTHS = {
    "AD": 24,
    "AT": 20,
    "BE": 16,
    "CH": 21,
    "CN": 0,
    "CZ": 24,
    "DE": 22,
    "DK": 18,
    "ES": 24,
    "FI": 18,
    "FR": 27,
    "GB": 22,
    "IE": 22,
    "IT": 27,
    "LU": 20,
    "NL": 18,
    "NO": 15,
    "PL": 28,
    "PT": 25,
    "SE": 24,
}
"""Known national IBAN lengths (others: 15 to 34 characters)."""
_CN_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_CN_ID_CHECK = "10X98765432"


def luhn_valid(digits: str) -> bool:
    """The Luhn checksum of a card number (digits only)."""
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char)
        if index % 2 == 1:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def cn_id_valid(value: str) -> bool:
    """The ISO 7064 MOD 11-2 check character of an 18-character resident id."""
    total = sum(int(c) * w for c, w in zip(value[:17], _CN_ID_WEIGHTS, strict=True))
    return _CN_ID_CHECK[total % 11] == value[17].upper()


def iban_valid(value: str) -> bool:
    """ISO 13616: the length for its country and the MOD 97-10 check digits."""
    compact = value.replace(" ", "").upper()
    expected = _IBAN_LENGTHS.get(compact[:2])
    if expected is not None and len(compact) != expected:
        return False
    if not 15 <= len(compact) <= 34 or not compact[2:4].isdigit():
        return False
    moved = compact[4:] + compact[:4]
    number = "".join(str(int(c, 36)) for c in moved)
    return int(number) % 97 == 1


def _card(match: re.Match[str]) -> bool:
    digits = re.sub(r"\D", "", match.group())
    return 13 <= len(digits) <= 19 and len(set(digits)) > 1 and luhn_valid(digits)


def _phone(match: re.Match[str]) -> bool:
    return 8 <= len(re.sub(r"\D", "", match.group())) <= 15


DIGITS_PREFILTER = re.compile(r"\d[ -]?\d", _A)
"""Cards, ids and phone numbers each hold two digits at most one space or hyphen apart."""
EMAIL_PREFILTER = re.compile(r"@[A-Za-z0-9-]", _A)
ADDRESS_PREFILTER = re.compile(r"\d{1,5}[A-Za-z]?,? [A-Z]|[路街道巷弄]\d", _A)
"""A street address starts with a house number before a capitalised name (or, in Chinese, a
street name ends just before the number)."""


def find_private(text: str) -> list[Span]:
    """Private data in `text`, earliest first; overlapping finds keep the more specific kind."""
    found: list[Span] = []
    if DIGITS_PREFILTER.search(text):
        _collect(found, "bank_account", _IBAN, text, lambda m: iban_valid(m.group()))
        _collect(found, "passport", _PASSPORT, text, None, group="value")
        _collect(found, "birth_date", _BIRTH_DATE, text, None, group="value")
        _collect(found, "card", _CARD, text, _card)
        _collect(found, "national_id", _CN_ID, text, lambda m: cn_id_valid(m.group()))
        _collect(found, "national_id", _US_SSN, text, None)
        for pattern in _PHONE_PATTERNS:
            _collect(found, "phone", pattern, text, _phone)
    if EMAIL_PREFILTER.search(text):
        _collect(found, "email", _EMAIL, text, None)
    if ADDRESS_PREFILTER.search(text):
        _collect(found, "address", _STREET, text, None)
        _collect(found, "address", _CN_STREET, text, None)
    return sorted(found, key=lambda s: s.start)


def _collect(
    found: list[Span],
    kind: str,
    pattern: re.Pattern[str],
    text: str,
    valid: Callable[[re.Match[str]], bool] | None,
    *,
    group: int | str = 0,
) -> None:
    for match in pattern.finditer(text):
        if valid is not None and not valid(match):
            continue
        span = Span(kind, match.start(group), match.end(group))
        if not any(span.start < s.end and s.start < span.end for s in found):
            found.append(span)


def redact_spans(text: str, spans: list[Span]) -> str:
    """`text` with every span replaced by `[<kind>]`."""
    parts, cursor = [], 0
    for span in sorted(spans, key=lambda s: s.start):
        parts += [text[cursor : span.start], f"[{span.kind}]"]
        cursor = span.end
    parts.append(text[cursor:])
    return "".join(parts)
