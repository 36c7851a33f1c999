"""Machine templates that are never evidence (acp.md §5.2, INGEST_NOISE_VERSION 2): matched on
the text after leading whitespace, by prefix or whole-line anchors, never as a substring."""

from __future__ import annotations

import re

NOISE_VERSION = 2

_PREFIXES: tuple[tuple[str, str], ...] = (
    ("reviewer-prompt", "You are the background skill reviewer."),
    ("maid-archive", "【maid 压缩归档】"),
    ("system-reminder", "<system-reminder"),
)
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "subagent-banner",
        re.compile(r"^Background subagent [0-9a-f-]{36} (?:reported|finished)"),
    ),
    ("tool-receipt-bare", re.compile(r"^(?:done|ok|success|finished|empty|no output)\.?$", re.I)),
    (
        "tool-receipt-written",
        re.compile(
            r"^(?:\[?[\w./\\-]{1,120}\]?\s+)?(?:written|created|updated|saved)\s+\d+\s*"
            r"(?:bytes?|B)?\.?$",
            re.I,
        ),
    ),
    (
        "tool-receipt-written-bracketed",
        re.compile(r"^\[[\w./\\-]{1,120}\s+written\]\s*(?:size\s*[:=]\s*\d+)?\.?$", re.I),
    ),
    (
        "tool-receipt-counts",
        re.compile(
            r"^(?:report\s+bytes|bytes|size|lines?|rows?)\s*[:=]?\s*\d+\s*(?:bytes?|B|行|条)?\.?$",
            re.I,
        ),
    ),
    (
        "tool-receipt-stale",
        re.compile(
            r"^(?:still\s+stale|unchanged|up[\s-]?to[\s-]?date|no\s+changes?)\b[\s\S]{0,40}$", re.I
        ),
    ),
)


def machine_template(text: str) -> str | None:
    """The id of the machine template `text` is, or None."""
    body = text.lstrip(" \t\r\n\u3000")
    for name, prefix in _PREFIXES:
        if body.startswith(prefix):
            return name
    for name, pattern in _PATTERNS:
        if pattern.search(body):
            return name
    return None
