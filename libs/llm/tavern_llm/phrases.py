"""What the offline provider understands: tool requests in plain words and recalled context.

Pure text rules, no IO; see `offline.py` for how a reply is put together from them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

FREE_TEXT_TOOLS = {"memory_write": "content", "memory_search": "query"}
_PHRASES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("memory_write", re.compile(r"\bremember that\s+", re.IGNORECASE)),
    ("memory_write", re.compile(r"记住\s*[：:]\s*")),  # noqa: RUF001
    ("memory_search", re.compile(r"\bsearch (?:your |the )?memory for\s+", re.IGNORECASE)),
    ("memory_search?", re.compile(r"\bwhat do you remember about\s+", re.IGNORECASE)),
    ("call", re.compile(r"\bcall\s+([A-Za-z_][\w.\-]*)\s+with\s*(?=\{)", re.IGNORECASE)),
    ("spill_read", re.compile(r"\bread spill\s+(\S+)", re.IGNORECASE)),
)
_TRAILING = re.compile(r"(?:[\s,;，；。.!?！？]|\band\b|\bthen\b|和)+$", re.IGNORECASE)  # noqa: RUF001
_RECALL_HEADER = re.compile(r"^\s*\[(memory|recall)\]", re.IGNORECASE)
_RECALL_LINE = re.compile(r"^\s*[-*]\s*\[([^\]\n]{2,})\]\s*(\S.*?)\s*$", re.MULTILINE)
_WORD = re.compile(r"[a-z0-9]+|[\u3400-\u9fff]+")
_STOPWORD_TEXT = """
a an the is are am was were be been what who whom which when where why how do does did you your
my me i we our us it its of to in on at for with about that this these those and or not no can
could would should will tell please know remember anything something
"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_QUESTION_TEXT = "what who where when why how which do does did is are can could will would should"
_QUESTION_START = frozenset(_QUESTION_TEXT.split())


@dataclass(frozen=True)
class ToolRequest:
    """A tool the user asked for; `explicit` is False when a question only hints at one."""

    tool: str
    arguments: str
    explicit: bool = True


@dataclass(frozen=True)
class Recalled:
    source: str
    text: str

    def cite(self) -> str:
        return f"[{self.source}] {self.text}"


def message_text(message: dict[str, Any]) -> str:
    """The text of a chat message whose content is a string or a list of parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict)]
        return "\n".join(p for p in parts if isinstance(p, str))
    return ""


def is_recall(message: dict[str, Any]) -> bool:
    """A user message that carries recalled context rather than something the user said."""
    if message.get("role") != "user":
        return False
    text = message_text(message)
    return bool(_RECALL_HEADER.match(text) or _RECALL_LINE.search(text))


def recalled_lines(message: dict[str, Any]) -> list[Recalled]:
    """`- [source] text` lines, or else every line under a `[memory]`/`[recall]` header."""
    text = message_text(message)
    lines = [Recalled(m.group(1).strip(), m.group(2)) for m in _RECALL_LINE.finditer(text)]
    if lines:
        return lines
    header = _RECALL_HEADER.match(text)
    if header is None:
        return []
    body = text[header.end() :].splitlines()
    plain = (line.strip().lstrip("-*").strip() for line in body)
    return [Recalled(header.group(1).lower(), line) for line in plain if line]


def _next_phrase(text: str, start: int) -> tuple[str, re.Match[str]] | None:
    found = [(kind, m) for kind, p in _PHRASES if (m := p.search(text, start)) is not None]
    return min(found, key=lambda pair: pair[1].start(), default=None)


def _object_end(text: str, start: int) -> int:
    """The end of the `{...}` starting at `start` (strings respected); unbalanced: the text end."""
    depth, in_string, escaped = 0, False, False
    for position in range(start, len(text)):
        char = text[position]
        if escaped:
            escaped = False
        elif in_string:
            escaped = char == "\\"
            in_string = char != '"'
        elif char == '"':
            in_string = True
        elif char in "{}":
            depth += 1 if char == "{" else -1
            if depth == 0:
                return position + 1
    return len(text)


def _free_text(text: str) -> str:
    return _TRAILING.sub("", text.strip()).strip()


def tool_requests(text: str) -> list[ToolRequest]:
    """Every tool request in `text`, in the order written.

    "remember that X" / "记住:X" (either colon) -> memory_write; "search memory for X" /
    "what do you remember about X" -> memory_search; "call NAME with {json}" -> NAME with the
    raw JSON as written; "read spill LOCATOR" -> spill_read. Free text runs to the next request
    or the end.
    """
    requests: list[ToolRequest] = []
    position = 0
    while (phrase := _next_phrase(text, position)) is not None:
        kind, match = phrase
        request, position = _request_at(text, kind, match)
        if request is not None:
            requests.append(request)
    return requests


def _request_at(text: str, kind: str, match: re.Match[str]) -> tuple[ToolRequest | None, int]:
    if kind == "call":
        end = _object_end(text, match.end())
        return ToolRequest(match.group(1), text[match.end() : end]), end
    if kind == "spill_read":
        locator = match.group(1).rstrip(".,;!?。，；")  # noqa: RUF001
        return ToolRequest(kind, json.dumps({"locator": locator})), match.end()
    following = _next_phrase(text, match.end())
    end = following[1].start() if following else len(text)
    value = _free_text(text[match.end() : end])
    if not value:
        return None, end
    tool = kind.rstrip("?")
    arguments = json.dumps({FREE_TEXT_TOOLS[tool]: value}, ensure_ascii=False)
    return ToolRequest(tool, arguments, explicit=not kind.endswith("?")), end


def keywords(text: str) -> set[str]:
    """Lower-case words without stop words or plural s, plus CJK character bigrams."""
    found: set[str] = set()
    for word in _WORD.findall(text.lower()):
        if word[0].isascii():
            found.update(_ascii_keyword(word))
        else:
            found.update(word[i : i + 2] for i in range(max(1, len(word) - 1)))
    return found


def _ascii_keyword(word: str) -> list[str]:
    if len(word) < 2 or word in _STOPWORDS:
        return []
    return [word[:-1] if len(word) > 3 and word.endswith("s") else word]


def matching(query: str, recalled: list[Recalled], limit: int = 3) -> list[Recalled]:
    """The recalled lines sharing most keywords with `query`, best first, ties in given order."""
    wanted = keywords(query)
    scored = [(len(wanted & keywords(r.text)), i, r) for i, r in enumerate(recalled)]
    best = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1]))
    return [r for _, _, r in best[:limit]]


def is_question(text: str) -> bool:
    words = text.lower().split()
    if words and words[0] in _QUESTION_START:
        return True
    return any(marker in text for marker in ("?", "\uff1f", "吗", "什么", "谁", "哪"))


def remember_topic(text: str) -> str | None:
    """For "what do you remember (about X)" / "你记得什么": X, or "" without a topic; else None."""
    match = re.search(r"what do you remember(?:\s+about\s+(.+))?", text, re.IGNORECASE)
    if match is not None:
        return _free_text(match.group(1) or "")
    return "" if re.search(r"你(?:还)?记得(?:什么|哪些)", text) else None


NUDGE = re.compile(r"^\[Write the next reply only as (.+?)\.\]$")
"""SillyTavern's group nudge (the `st` profile's last system line in a group chat)."""


def nudged(messages: list[dict[str, Any]]) -> str | None:
    """The member an `st` group request is written for, from its nudge after the history."""
    for message in reversed(messages):
        if message.get("role") != "system":
            return None
        found = NUDGE.match(str(message.get("content") or "").strip())
        if found:
            return found.group(1)
    return None


def speaker_in(system: str) -> str | None:
    """The member a group request is written for, read back from the loop's group note
    (`[Group chat with … Write the next reply only as NAME; the others …]`)."""
    for line in reversed(system.splitlines()):
        if line.startswith("[Group chat with ") and "Write the next reply only as " in line:
            rest = line.split("Write the next reply only as ", 1)[1]
            return rest.split("; the others", 1)[0] or None
    return None
