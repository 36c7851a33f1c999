"""The release gate of distilled observations (acp.md §15): what only held in one session, on
one machine or at one moment is not stored `active`. Checked in this order, the first hard
finding deciding, else the first soft one:

ephemeral -> env-bound -> one-shot-path -> stale-version -> empty-emotion

Nothing is dropped: a hard finding holds the observation `quarantined` for a person to review, a
soft one tags it. Code blocks, URLs and paths are cut from the prose first; an external anchor
(a URL, an absolute path, a commit, a date, a version) lowers an ephemeral finding one level.
acp.md's `english` and `selfref` classes are left out: this tavern speaks English as well as
Chinese, and its observations name the user as their subject.
"""
# ruff: noqa: RUF001 - full-width punctuation is part of the Chinese patterns

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

Level = Literal["hard", "soft"]
Decision = Literal["pass", "soft_tag", "hard_quarantine"]

CLASSES = ("ephemeral", "env-bound", "one-shot-path", "stale-version", "empty-emotion")
DECISIONS: Mapping[str, Level] = {
    "env-bound": "hard",
    "one-shot-path": "hard",
    "stale-version": "hard",
    "empty-emotion": "hard",
}
"""Each class's level (acp.md makes them configurable; its defaults tag env-bound and
stale-version softly, here they hold: an address or a "latest version" is no lasting fact)."""

_CUTS = (
    ("fence", re.compile(r"```[\s\S]*?(?:```|$)|~~~[\s\S]*?(?:~~~|$)")),
    ("inline-code", re.compile(r"`[^`\n]*`")),
    ("url", re.compile(r"(?:https?://|www\.)[^\s，。；、）)】」]+")),
    ("path", re.compile(r"[A-Za-z]:[\\/][^\s，。；、）)】」]*")),
    ("path", re.compile(r"(?:/[\w.@+-]+){2,}/?")),
)
_ANCHORS = (
    re.compile(r"(?:https?://|www\.)\S+"),
    re.compile(r"[A-Za-z]:[\\/]|/(?:home|Users|usr|etc|var|opt|mnt|tmp|srv)/"),
    re.compile(r"\b(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b"),
    re.compile(r"\b\d{4}-\d{2}-\d{2}\b"),
    re.compile(r"\bv?\d+\.\d+(?:\.\d+)?\b"),
)

_FAMILIES: Mapping[str, re.Pattern[str]] = {
    "S1": re.compile(
        r"这个|那个|刚才|刚刚|上面|前面|现在|目前|本次|本轮"
        r"|\b(?:right now|just now|at the moment|this (?:turn|session))\b",
        re.IGNORECASE,
    ),
    "S2": re.compile(
        r"正在做|正在|在做|接下来要|待会儿|稍后|下一步"
        r"|\b(?:is|are|am) (?:currently |now )?(?:working on|in the middle of|about to)\b"
        r"|\b(?:next step|later today|in a (?:minute|moment|bit))\b",
        re.IGNORECASE,
    ),
    "S3": re.compile(
        r"先[^，。；！？]{0,8}(?:试试|试下|试一下)|暂时|占位|还没|回头再|待办(?:中|：|:)|待办事项"
        r"|\b(?:for now|temporarily|placeholder|not yet)\b",
        re.IGNORECASE,
    ),
    "S4": re.compile(
        r"上一轮|前面那条|第\s*\d+\s*步|\b(?:previous|last) (?:turn|message|reply)\b|\bstep \d+\b",
        re.IGNORECASE,
    ),
    "S6": re.compile(
        r"同意继续|继续当前任务|已重启|已安装完成|已处理完|待办已|目前已"
        r"|\b(?:agreed to continue|continue (?:with )?the current task|(?:just|already) restarted"
        r"|finished installing|already (?:installed|handled))\b",
        re.IGNORECASE,
    ),
}
_HARD_ALONE = frozenset({"S6"})
"""A family that alone makes a finding hard: a report that something is done is session news."""

_ENV_BOUND = re.compile(
    r"/home/[^/\s]+/|/Users/[^/\s]+/|[A-Za-z]:\\Users\\[^\\\s]+\\"
    r"|\blocalhost:\d+|\b127\.0\.0\.1:\d+"
)
_ONE_SHOT = re.compile(r"/tmp/|/var/folders/|\bmktemp\b|[\w-]+\.tmp\b")
_VERSION = re.compile(r"\bv?\d+\.\d+(?:\.\d+)?\b")
_STALE_CLAIM = re.compile(
    r"最新|现在(?:用|是)|以后不用|目前(?:是|最新)|已经过时|当前最新"
    r"|\b(?:latest|newest|current (?:version|release)|no longer uses?|outdated"
    r"|now (?:uses|runs))\b",
    re.IGNORECASE,
)
_EXTERNAL_ACTION = re.compile(
    r"实现|修复|部署|提交|合并|安装|配置|编译|测试|上线|回滚|改成|调到|写入|导出|导入|推送|拉取|删除"
    r"|创建|新增|重构|升级|迁移|替换|调用|注入"
    r"|\b(?:implement|fix|deploy|commit|merge|install|configure|compile|test|release|migrate"
    r"|upgrade|refactor|create|delete)\w*",
    re.IGNORECASE,
)
_EMOTION = re.compile(
    r"太(?:爽|好|棒|强)|终于|哈哈|舒服|绝了|崩溃|糟糕|难受|开心|难过"
    r"|\b(?:finally|haha+|yay|awesome|ugh|so (?:happy|sad|great|good))\b",
    re.IGNORECASE,
)
_CONTENT_WORD = re.compile(r"[\u4e00-\u9fff]{2,}|[A-Za-z]{3,}|\d+")
EMPTY_EMOTION_MAX_CHARS = 24
EMPTY_EMOTION_MIN_WORDS = 5


@dataclass(frozen=True)
class Finding:
    cls: str
    level: Level
    span: str


@dataclass(frozen=True)
class ReleaseVerdict:
    decision: Decision
    cls: str | None = None
    span: str = ""
    findings: tuple[Finding, ...] = ()

    @property
    def held(self) -> bool:
        """Stored `quarantined` for review instead of `active`."""
        return self.decision == "hard_quarantine"

    @property
    def flags(self) -> tuple[str, ...]:
        """`release:<class>` (held) or `release-tag:<class>` (soft) for each finding."""
        return tuple(
            f"release:{f.cls}" if f.level == "hard" else f"release-tag:{f.cls}"
            for f in self.findings
        )

    def as_json(self) -> dict[str, object]:
        return {
            "decision": self.decision,
            "class": self.cls,
            "span": self.span[:60],
            "findings": [{"class": f.cls, "level": f.level} for f in self.findings],
        }


def strip_non_prose(text: str) -> tuple[str, list[tuple[str, str]]]:
    """The prose of `text` and the cut spans (kind, text): code, URLs, paths."""
    spans: list[tuple[str, str]] = []
    body = text
    for kind, pattern in _CUTS:

        def cut(m: re.Match[str], kind: str = kind) -> str:
            spans.append((kind, m.group(0)))
            return " "

        body = pattern.sub(cut, body)
    return re.sub(r"[ \t]{2,}", " ", body).strip(), spans


def gate(text: str) -> ReleaseVerdict:
    """The release verdict of one observation's text (pure)."""
    body, spans = strip_non_prose(text)
    anchored = any(p.search(text) for p in _ANCHORS)
    located = " ".join([body, *(s for kind, s in spans if kind in ("path", "url"))])
    found = [
        f
        for f in (
            _ephemeral(body, anchored),
            _matched("env-bound", _ENV_BOUND, located),
            _matched("one-shot-path", _ONE_SHOT, located),
            _stale_version(body),
            _empty_emotion(body),
        )
        if f is not None
    ]
    if not found:
        return ReleaseVerdict("pass")
    hard = [f for f in found if f.level == "hard"]
    main = (hard or found)[0]
    decision: Decision = "hard_quarantine" if main.level == "hard" else "soft_tag"
    return ReleaseVerdict(decision, main.cls, main.span, tuple(found))


def _ephemeral(body: str, anchored: bool) -> Finding | None:
    families = [name for name, p in _FAMILIES.items() if p.search(body)]
    if not families:
        return None
    hard = bool(_HARD_ALONE.intersection(families)) or len(families) >= 2
    if anchored and not hard:
        return None  # an anchor lowers soft to pass
    level: Level = "hard" if hard and not anchored else "soft"
    return Finding("ephemeral", level, body[:60])


def _matched(cls: str, pattern: re.Pattern[str], view: str) -> Finding | None:
    m = pattern.search(view)
    return Finding(cls, DECISIONS[cls], m.group(0)) if m else None


def _stale_version(body: str) -> Finding | None:
    version = _VERSION.search(body)
    if version is None or not _STALE_CLAIM.search(body):
        return None
    return Finding("stale-version", DECISIONS["stale-version"], version.group(0))


def _empty_emotion(body: str) -> Finding | None:
    if len(body) > EMPTY_EMOTION_MAX_CHARS or _EXTERNAL_ACTION.search(body):
        return None
    if not _EMOTION.search(body):
        return None
    if len(_CONTENT_WORD.findall(body)) >= EMPTY_EMOTION_MIN_WORDS:
        return None
    return Finding("empty-emotion", DECISIONS["empty-emotion"], body)
