"""What the write gate looks for: credentials, prompt injection (English and Chinese) and private
data (emails, phone numbers, Luhn-valid card numbers, national id shapes, checked IBANs, passport
numbers, dates of birth and street addresses).

Each finder returns named findings; the gate decides what to do with them.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

# --- credentials: never stored --------------------------------------------------------------------

_A = re.ASCII  # `\b` and `\w` as in JavaScript: a CJK letter next to a key is still a boundary
_AI = re.ASCII | re.IGNORECASE

SECRET_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("private_key", re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----", _A)),
    ("aws_access_key", re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|AIPA)[0-9A-Z]{16}\b", _A)),
    (
        "aws_secret_key",
        re.compile(r"\baws_?secret_?(?:access_?)?key\b\W{0,3}[:=]\s*['\"]?[A-Za-z0-9/+=]{40}", _AI),
    ),
    ("github_token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{22,})", _A)),
    ("slack_token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}", _A)),
    (
        "slack_webhook",
        re.compile(r"https://hooks\.slack\.com/services/T\w+/B\w+/\w+", _A),
    ),
    ("anthropic_key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}", _A)),
    ("openai_key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}", _A)),
    ("stripe_key", re.compile(r"\b[sr]k_(?:live|test)_[0-9A-Za-z]{16,}", _A)),
    ("google_api_key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}", _A)),
    (
        "jwt",
        re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}", _A),
    ),
    (
        "url_password",
        re.compile(
            r"\b[a-z][a-z0-9+.-]{1,20}://[^\s:/@'\"]{0,128}:(?![*x]+@|<|\$\{)[^\s@/'\"]{1,256}@[\w.-]+",
            _AI,
        ),
    ),
    ("bearer_token", re.compile(r"\bbearer\s+[A-Za-z0-9_\-.=+/]{20,}", _AI)),
    (
        "credential_assignment",
        re.compile(
            r"\b(?:[A-Za-z0-9]{1,32}[_-]){0,4}"  # DB_PASSWORD=, SERVICE_API_KEY=
            r"(?:sk|pk|api[_-]?key|token|secret|password|passwd|pwd|credential|bearer"
            r"|private[_-]?key|access[_-]?key|client[_-]?secret)\b\s*[:=]\s*['\"]?[A-Za-z0-9_\-]{12,}",
            _AI,
        ),
    ),
    ("azure_storage_key", re.compile(r"\bAccountKey\s*=\s*[A-Za-z0-9+/]{40,}={0,2}", _A)),
    ("alibaba_access_key", re.compile(r"\bLTAI[0-9A-Za-z]{12,30}\b", _A)),
    ("gitlab_token", re.compile(r"\bglpat-[0-9A-Za-z_-]{20,}", _A)),
    ("npm_token", re.compile(r"\bnpm_[A-Za-z0-9]{30,}", _A)),
    ("huggingface_token", re.compile(r"\bhf_[A-Za-z0-9]{30,}", _A)),
    (
        "password_phrase",
        re.compile(r"\bpass(?:word|code|phrase)\s+(?:is|was)\s*[:=]?\s*['\"]?[^\s'\"]{6,}", _AI),
    ),
    ("password_zh", re.compile(r"(?:密码|密碼|口令)\s*(?:是|为|為|[:：=])\s*[^\s，。]{6,}")),  # noqa: RUF001
)

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

# --- prefilters: one pass over a text that rules a whole family out -------------------------------
#
# Every branch of a family's prefilter is a piece that each match of one of its patterns contains,
# under that pattern's flags: no prefilter hit, no pattern of the family can match, so its
# detailed patterns are skipped. `re` scans quickly only when every branch starts with a plain
# character, so a case-insensitive piece is spelled once per case of its first character.

_CASE_VARIANTS = {"i": "iIİı", "k": "kK\u212a", "s": "sSſ"}  # noqa: RUF001 - as `re` folds them
"""Characters `re.IGNORECASE` (Unicode) equates with an ASCII letter, where there are more than
its lower and upper case (dotted and dotless i, the Kelvin sign, the long s)."""


def case_variants(letter: str, *, ascii_only: bool) -> str:
    """The characters `re.IGNORECASE` matches for the ASCII letter `letter` (under `re.ASCII`
    only its two cases)."""
    lower = letter.lower()
    if ascii_only:
        return lower + lower.upper()
    return _CASE_VARIANTS.get(lower, lower + lower.upper())


def _any_case(pieces: tuple[str, ...], flags: str) -> list[str]:
    """`pieces` (each starting with an ASCII letter) matched case-insensitively under `flags`."""
    return [
        re.escape(first) + f"(?{flags}:{piece[1:]})"
        for piece in pieces
        for first in case_variants(piece[0], ascii_only="a" in flags)
    ]


def _prefilter(branches: list[str]) -> re.Pattern[str]:
    return re.compile("|".join(branches))


SECRET_PREFILTER = _prefilter(
    [
        "-----BEGIN ",  # private_key
        *("AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "AIPA"),  # aws_access_key
        r"gh[pousr]_",  # github_token
        "github_pat_",
        "xox",  # slack_token
        r"hooks\.slack\.com/",  # slack_webhook
        "sk-",  # anthropic_key, openai_key
        r"k_(?:live|test)_",  # stripe_key
        "AIza",  # google_api_key
        "eyJ",  # jwt
        r":(?ai://[^\s:/@'\"]{0,128}:)",  # url_password
        r":(?ai:\s*['\"]?[A-Za-z0-9_\-]{12})",  # credential_assignment
        r"=(?ai:\s*['\"]?[A-Za-z0-9_\-]{12})",
        *_any_case(("aws",), "ai"),  # aws_secret_key
        *_any_case((r"bearer\s",), "ai"),  # bearer_token
        "AccountKey",  # azure_storage_key
        "LTAI",  # alibaba_access_key
        "glpat-",  # gitlab_token
        "npm_",  # npm_token
        "hf_",  # huggingface_token
        *_any_case((r"pass(?:word|code|phrase)\s",), "ai"),  # password_phrase
        *("密码", "密碼", "口令"),  # password_zh
    ]
)
INJECTION_PREFILTER = _prefilter(
    [
        *_any_case(
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

_ZERO_WIDTH = re.compile("[\u200b-\u200f\u2060-\u2064\ufeff\u00ad]")
_SPACES = re.compile(r"\s+")


def normalise(text: str) -> str:
    """NFKC, zero-width characters removed, whitespace collapsed: full-width letters, hidden
    joiners and odd spacing do not hide a pattern."""
    if text.isprintable() and "  " not in text and unicodedata.is_normalized("NFKC", text):
        # Zero-width characters and every whitespace but " " are unprintable: nothing to do.
        return text
    folded = unicodedata.normalize("NFKC", _ZERO_WIDTH.sub("", text))
    return _SPACES.sub(" ", folded)


def _named(
    patterns: tuple[tuple[str, re.Pattern[str]], ...],
    prefilter: re.Pattern[str],
    texts: tuple[str, ...],
) -> list[str]:
    if not any(prefilter.search(t) for t in texts):
        return []
    return [name for name, pattern in patterns if any(pattern.search(t) for t in texts)]


def find_secrets(text: str, folded: str | None = None) -> list[str]:
    """Names of the credential patterns found in `text` (or in its normalised form)."""
    return _named(SECRET_PATTERNS, SECRET_PREFILTER, variants(text, folded))


def find_injections(text: str, folded: str | None = None) -> list[str]:
    """Names of the prompt-injection patterns found in `text` (or in its normalised form)."""
    return _named(INJECTION_PATTERNS, INJECTION_PREFILTER, variants(text, folded))


def variants(text: str, folded: str | None = None) -> tuple[str, ...]:
    """`text`, and its normalised form when that differs (pass `folded` if already known)."""
    folded = normalise(text) if folded is None else folded
    return (text,) if folded == text else (text, folded)


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
