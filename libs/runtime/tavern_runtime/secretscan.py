"""Credentials in text: the patterns the ledger's write gate blocks on, and redaction with them
for text that goes where secrets must not (a provider's error in `turn/end`, a log line).

One place for both, so what the ledger refuses to store is what the loop scrubs before it writes
the session log. `redact_url` takes the password out of a URL or DSN before it is shown.
"""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import urlsplit, urlunsplit

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


def any_case(pieces: tuple[str, ...], flags: str) -> list[str]:
    """`pieces` (each starting with an ASCII letter) matched case-insensitively under `flags`."""
    return [
        re.escape(first) + f"(?{flags}:{piece[1:]})"
        for piece in pieces
        for first in case_variants(piece[0], ascii_only="a" in flags)
    ]


def prefilter(branches: list[str]) -> re.Pattern[str]:
    return re.compile("|".join(branches))


SECRET_PREFILTER = prefilter(
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
        *any_case(("aws",), "ai"),  # aws_secret_key
        *any_case((r"bearer\s",), "ai"),  # bearer_token
        "AccountKey",  # azure_storage_key
        "LTAI",  # alibaba_access_key
        "glpat-",  # gitlab_token
        "npm_",  # npm_token
        "hf_",  # huggingface_token
        *any_case((r"pass(?:word|code|phrase)\s",), "ai"),  # password_phrase
        *("密码", "密碼", "口令"),  # password_zh
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


def named(
    patterns: tuple[tuple[str, re.Pattern[str]], ...],
    prefilter: re.Pattern[str],
    texts: tuple[str, ...],
) -> list[str]:
    if not any(prefilter.search(t) for t in texts):
        return []
    return [name for name, pattern in patterns if any(pattern.search(t) for t in texts)]


def find_secrets(text: str, folded: str | None = None) -> list[str]:
    """Names of the credential patterns found in `text` (or in its normalised form)."""
    return named(SECRET_PATTERNS, SECRET_PREFILTER, variants(text, folded))


def variants(text: str, folded: str | None = None) -> tuple[str, ...]:
    """`text`, and its normalised form when that differs (pass `folded` if already known)."""
    folded = normalise(text) if folded is None else folded
    return (text,) if folded == text else (text, folded)


# --- redaction ------------------------------------------------------------------------------------

REDACTED = "[redacted]"


def redact_secrets(text: str) -> str:
    """`text` with every credential a pattern finds replaced by `[redacted:<kind>]`.

    When only the normalised form shows a secret (full-width letters, zero-width joiners), the
    normalised text is redacted and returned instead.
    """
    if not text or (_plain(text) and not SECRET_PREFILTER.search(text)):
        return text  # the common case of a log value: one scan
    if not find_secrets(text):
        return text
    redacted = _redact_matches(text)
    return _redact_matches(normalise(redacted)) if find_secrets(redacted) else redacted


def _plain(text: str) -> bool:
    """Printable ASCII without double spaces: its own normalised form."""
    return text.isascii() and text.isprintable() and "  " not in text


def _redact_matches(text: str) -> str:
    for name, pattern in SECRET_PATTERNS:
        text = pattern.sub(f"[redacted:{name}]", text)
    return text


def redact_url(url: str) -> str:
    """`url` (or a comma-separated list of them) with any password in its userinfo replaced;
    the user name stays, so a log still says who connected."""
    return ",".join(_redact_one(part) for part in url.split(","))


def _redact_one(url: str) -> str:
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return REDACTED
    if "@" not in parts.netloc:
        return url
    userinfo, _, host = parts.netloc.rpartition("@")
    user = userinfo.split(":", 1)[0]
    shown = f"{user}:{REDACTED}@{host}" if ":" in userinfo else f"{REDACTED}@{host}"
    return urlunsplit(parts._replace(netloc=shown))
