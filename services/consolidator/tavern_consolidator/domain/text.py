"""Text measures shared by the rules: CJK-friendly bigrams, Jaccard, overlap, ack-only messages."""

from __future__ import annotations

import unicodedata

ACK_FILLERS: tuple[str, ...] = (
    "继续",
    "接着",
    "重启",
    "重试",
    "再试",
    "再尝试",
    "尝试",
    "试试",
    "测试",
    "可以",
    "不用",
    "不必",
    "好的",
    "好",
    "行",
    "嗯",
    "啊",
    "哦",
    "啦",
    "呗",
    "的",
    "了",
    "吧",
    "呢",
    "吗",
    "呀",
    "嘛",
    "再",
    "一次",
    "一下",
    "下",
    "次",
    "我们",
    "我",
    "你",
    "先",
    "就",
    "都",
    "把",
    "那",
    "这",
    "样",
    "完",
    "搞定",
    "完成",
    "结束",
    "开始",
    "推进",
    "来",
    "已经",
)
"""Removed in this order by `is_ack_text` (acp.md §12.2)."""
ACK_MAX_CHARS = 20


def _is_mark(ch: str) -> bool:
    """Whitespace, punctuation or a symbol (`[\\s\\p{P}\\p{S}]`)."""
    return ch.isspace() or unicodedata.category(ch)[0] in "PSZ"


def strip_marks(text: str) -> str:
    return "".join(ch for ch in text if not _is_mark(ch))


def _windows(text: str) -> set[str]:
    if not text:
        return set()
    if len(text) == 1:
        return {text}
    return {text[i : i + 2] for i in range(len(text) - 1)}


def bigrams(text: str) -> set[str]:
    """Two-character windows after removing whitespace, punctuation and symbols."""
    return _windows(strip_marks(text))


def jaccard(a: set[str], b: set[str]) -> float:
    """Intersection over union; two empty sets are identical (1.0)."""
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def overlap(a: str, b: str) -> float:
    """Bigram overlap against the smaller set, whitespace removed (acp.md §18.3)."""
    left = _windows("".join(a.split()))
    right = _windows("".join(b.split()))
    if not left or not right:
        return 0.0
    return len(left & right) / min(len(left), len(right))


def is_ack_text(text: str) -> bool:
    """An acknowledgement with nothing to learn from (`继续吧`, question marks only);
    `可以push` is not."""
    body = text.strip()
    if not body:
        return True
    if len(body) > ACK_MAX_CHARS:
        return False
    for filler in ACK_FILLERS:
        body = body.replace(filler, "")
    return not strip_marks(body)


def non_space_len(text: str) -> int:
    return sum(1 for ch in text if not ch.isspace())
