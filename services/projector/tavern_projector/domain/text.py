"""Search tokens, CJK-aware: Latin (and other spaced scripts) by words, CJK by bigrams.

Chinese, Japanese and Korean text has no spaces between words, so a message is indexed by
every pair of adjacent CJK characters (and each single one); a query of two or more CJK
characters becomes its bigrams, a single CJK character stays itself. Everything else is
split into case-folded words.
"""

from __future__ import annotations

import re
import unicodedata

from tavern_runtime import tokens

_RUN = re.compile(r"[^\W_]+")
CJK_RANGES = (
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3130, 0x318F),  # Hangul compatibility Jamo
    (0x31F0, 0x31FF),  # Katakana phonetic extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xAC00, 0xD7AF),  # Hangul syllables
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFF66, 0xFF9F),  # half-width Katakana
    (0x20000, 0x3FFFF),  # CJK extensions B and later
)


_CJK_CLASS = "".join(f"{chr(low)}-{chr(high)}" for low, high in CJK_RANGES)
_CJK_RUN = re.compile(f"[{_CJK_CLASS}]+")
_SCRIPT_RUN = re.compile(f"[{_CJK_CLASS}]+|[^{_CJK_CLASS}]+")


def normalise(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def segments(text: str) -> list[tuple[bool, str]]:
    """Runs of letters and digits, split where the script switches between CJK and not.

    One regular expression splits each run (a character at a time in Python was a tenth of
    the projector's CPU under load: every message's history row is indexed)."""
    return [
        (_CJK_RUN.match(part) is not None, part)
        for run in _RUN.findall(normalise(text))
        for part in _SCRIPT_RUN.findall(run)
    ]


def _bigrams(run: str) -> list[str]:
    return [run[i : i + 2] for i in range(len(run) - 1)]


def index_tokens(text: str) -> list[str]:
    """Every token a message can be found by (sorted, unique)."""
    tokens: set[str] = set()
    for cjk, run in segments(text):
        if cjk:
            tokens.update(run)
            tokens.update(_bigrams(run))
        else:
            tokens.add(run)
    return sorted(tokens)


def query_tokens(text: str) -> list[str]:
    """The tokens a message must all contain to match the query (sorted, unique)."""
    tokens: set[str] = set()
    for cjk, run in segments(text):
        tokens.update(_bigrams(run) if cjk and len(run) > 1 else [run])
    return sorted(tokens)


def excerpt(text: str, tokens: list[str], width: int = 400, lead: int = 80) -> str:
    """Up to `width` characters from `lead` before the earliest hit, `…` where cut."""
    folded = normalise(text)
    hits = [at for token in tokens if (at := folded.find(token)) >= 0]
    start = max(0, min(hits, default=0) - lead) if len(folded) == len(text) else 0
    cut = text[start : start + width]
    prefix = "…" if start > 0 else ""
    suffix = "…" if start + width < len(text) else ""
    return f"{prefix}{cut}{suffix}"


def rough_tokens(text: str) -> int:
    """A model-token estimate for budgets (CJK-aware, `tavern_runtime.tokens`), at least one."""
    return max(1, tokens.estimate_tokens(text))
