"""SillyTavern world-info keyword activation over recent messages, deterministic when seeded.

Per entry, in this order: disabled, trigger filter, delay (messages), failed probability,
recursion exclusions, `@@activate`/`@@dont_activate` decorators, `constant`, primary keys (one
must match), secondary keys by selective logic (AND ANY, NOT ALL, NOT ANY, AND ALL). Matches
then pass inclusion groups, the probability roll and the token budget in candidate order
(`order` descending, then `uid`). Keys are case-insensitive and substring-matched unless the
entry (or the scan) asks for case sensitivity or whole words; `/regex/flags` keys are regexes.

Timed effects, per chat, from the entries' past activations (`ScanSettings.past`: the chat's
message count at each earlier request and the entries it activated, as the session log records
them, so a replay reproduces them): `sticky` N keeps an entry active for the N messages after
the one that activated it (its keys need not match, no probability roll, and re-activation while
sticky does not extend it); `cooldown` M then keeps it from activating for M messages; `delay`
N keeps it off until the chat has N messages. Past activations at or after the current message
count are not past (a swipe asks again for the same message).

Recursion: an activated entry's content is scanned for further entries, round after round,
unless it has `preventRecursion`; an entry with `excludeRecursion` is never activated by such
text; `max_recursion_steps` limits the rounds (0: until a round adds nothing).

An entry over the remaining budget ends the scan; with `truncate_over_budget` (a tool that
asked for `maxTokens`) it is returned cut to what is left, marked `truncated`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from tavern_runtime.cards.lorebook import AND_ALL, AND_ANY, NOT_ALL, NOT_ANY

MAX_SCAN_DEPTH = 1000
START = "\x01"
_REGEX_KEY = re.compile(r"^/((?:\\/|[^/])+)/([gimsuy]*)$")
_WORD_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
Rng = Callable[[], float]


@dataclass(frozen=True)
class ScanSettings:
    """Global world-info settings (SillyTavern's defaults)."""

    scan_depth: int = 2
    context_size: int = 4096
    budget_percent: int = 25
    budget_cap: int = 0
    token_budget: int | None = None
    """An explicit budget (a tool's `max_tokens`) instead of the context percentage."""
    case_sensitive: bool = False
    match_whole_words: bool = False
    include_names: bool = True
    recursive: bool = False
    max_recursion_steps: int = 0
    use_group_scoring: bool = False
    trigger: str = "normal"
    truncate_over_budget: bool = False
    message_count: int | None = None
    """The chat's length (the scanned messages may be only its latest); None: their count."""
    past: tuple[tuple[int, tuple[str, ...]], ...] = ()
    """Earlier activations in this chat, oldest first: (message count then, entry ids)."""

    @property
    def budget(self) -> int:
        if self.token_budget is not None:
            return self.token_budget
        limit = self.context_size * self.budget_percent // 100
        return min(limit, self.budget_cap) if self.budget_cap > 0 else limit


@dataclass(frozen=True)
class Message:
    name: str
    text: str


@dataclass(frozen=True)
class Book:
    name: str
    entries: Sequence[dict[str, Any]]
    scan_depth: int | None = None
    token_budget: int | None = None
    recursive_scanning: bool = True

    @classmethod
    def of(cls, book: dict[str, Any]) -> Book:
        """From a normalised lorebook (see `lorebook`)."""
        return cls(
            str(book.get("name", "")),
            book.get("entries", []),
            book.get("scan_depth"),
            book.get("token_budget"),
            bool(book.get("recursive_scanning", True)),
        )


@dataclass(frozen=True)
class Candidate:
    entry_id: str
    book: int
    index: int
    entry: dict[str, Any]

    @property
    def order(self) -> int:
        return int(self.entry["order"])

    @property
    def uid(self) -> int:
        return int(self.entry["uid"])


@dataclass(frozen=True)
class Activated:
    candidate: Candidate
    reason: str
    tokens: int
    content: str
    truncated: bool = False


@dataclass
class Outcome:
    """Accepted entries in acceptance order, and why others that matched were dropped."""

    activated: list[Activated] = field(default_factory=list)
    dropped: dict[str, str] = field(default_factory=dict)
    used_tokens: int = 0
    budget: int = 0
    rounds: int = 0

    def by_position(self) -> dict[int, str]:
        """Text per insertion position: `order` ascending, then `uid` descending."""
        groups: dict[int, list[Activated]] = {}
        for item in self.activated:
            groups.setdefault(int(item.candidate.entry["position"]), []).append(item)
        return {
            pos: "\n".join(a.content for a in sorted(items, key=_assembly_order))
            for pos, items in sorted(groups.items())
        }


def _assembly_order(item: Activated) -> tuple[int, int]:
    return (item.candidate.order, -item.candidate.uid)


def count_tokens(text: str) -> int:
    """SillyTavern's fallback estimate: characters / 3.5, rounded."""
    return round(len(text) / 3.5)


# --- entry point ----------------------------------------------------------------------------------


def activate(
    books: Sequence[Book], chat: Sequence[Message], settings: ScanSettings, rng: Rng
) -> Outcome:
    """Which entries activate for `chat` (oldest first) under `settings`."""
    scan = _Scan(books, chat, settings, rng)
    scan.run()
    return scan.outcome


def candidates(books: Sequence[Book]) -> list[Candidate]:
    """Every entry of every book, `order` descending, then `uid`, then declaration order."""
    found = [
        Candidate(f"{book.name or f'#{b}'}.{entry['uid']}", b, i, entry)
        for b, book in enumerate(books)
        for i, entry in enumerate(book.entries)
    ]
    return sorted(found, key=lambda c: (-c.order, c.uid, c.book, c.index))


class _Scan:
    def __init__(
        self, books: Sequence[Book], chat: Sequence[Message], settings: ScanSettings, rng: Rng
    ) -> None:
        self.books, self.settings, self.rng = books, settings, rng
        self.newest_first = [_render(m, settings.include_names) for m in reversed(chat)]
        self.message_count = (
            settings.message_count if settings.message_count is not None else len(chat)
        )
        self.candidates = candidates(books)
        self.timed = timed_effects(self.candidates, settings.past, self.message_count)
        self.outcome = Outcome(budget=settings.budget)
        self.accepted: set[str] = set()
        self.accepted_groups: set[str] = set()
        self.failed: set[str] = set()
        self.book_used = [0] * len(books)
        self.recursion = ""
        self.texts: dict[tuple[int, bool], ScanText] = {}
        self.overflowed = False

    def run(self) -> None:
        level = 0
        while not self.overflowed:
            fresh = self.round(level)
            self.outcome.rounds += 1
            if not self._recurse(fresh, level):
                return
            level += 1

    def _recurse(self, fresh: list[Activated], level: int) -> bool:
        steps = self.settings.max_recursion_steps
        if not self.settings.recursive or (steps and level + 1 >= steps):
            return False
        added = [a.content for a in fresh if a.content and not self._prevents(a.candidate)]
        if not added:
            return False
        self.recursion = "\n".join(filter(None, [self.recursion, *added]))
        self.texts.clear()
        return True

    def round(self, level: int) -> list[Activated]:
        matched = [
            (c, reason)
            for c in self.candidates
            if c.entry_id not in self.accepted and (reason := self.evaluate(c, level))
        ]
        matched = self.groups(matched)
        return [a for c, reason in matched if (a := self.admit(c, reason)) is not None]

    # -- per entry ---------------------------------------------------------------------------------

    def evaluate(self, c: Candidate, level: int) -> str | None:
        e = c.entry
        if e["disable"] or (e["triggers"] and self.settings.trigger not in e["triggers"]):
            return None
        timed = self.timed.get(c.entry_id)
        if timed == COOLDOWN:
            self.outcome.dropped[c.entry_id] = COOLDOWN
            return None
        if timed == STICKY:
            return STICKY
        if (e["delay"] or 0) > self.message_count or c.entry_id in self.failed:
            return None
        if level > 0 and self._excludes(c):
            return None
        if e["delayUntilRecursion"] and level < e["delayUntilRecursion"]:
            return None
        decorated = _decorator(e["content"])
        if decorated is not None:
            return "decorator" if decorated else None
        if e["constant"]:
            return "constant"
        return self._keys(c, level)

    def _keys(self, c: Candidate, level: int) -> str | None:
        e = c.entry
        if not e["key"]:
            return None
        text = self.text(c, level)
        if not any(self.matches(c, key, text) for key in e["key"]):
            return None
        secondary = e["keysecondary"]
        if not e["selective"] or not secondary:
            return "primary"
        hits = sum(1 for key in secondary if self.matches(c, key, text))
        return "secondary" if _logic(e["selectiveLogic"], hits, len(secondary)) else None

    def matches(self, c: Candidate, key: str, text: ScanText) -> bool:
        e = c.entry
        case = _pick(e["caseSensitive"], self.settings.case_sensitive)
        whole = _pick(e["matchWholeWords"], self.settings.match_whole_words)
        if _regex(key) is not None:
            return key_matches(key, text.raw, case, whole)
        return _key_in(key if case else key.lower(), text.raw if case else text.lower, whole)

    def text(self, c: Candidate, level: int) -> ScanText:
        depth = self._depth(c)
        cache_key = (depth, level > 0)
        if cache_key not in self.texts:
            shown = self.newest_first[:depth] if depth > 0 else []
            parts = [START + "\n\x01".join(shown)] if shown else []
            if self.recursion and level > 0:
                parts.append(self.recursion)
            self.texts[cache_key] = ScanText.of("\n\x01".join(parts))
        return self.texts[cache_key]

    def _depth(self, c: Candidate) -> int:
        book = self.books[c.book]
        depth = c.entry["scanDepth"]
        if depth is None:
            depth = book.scan_depth if book.scan_depth is not None else self.settings.scan_depth
        return min(int(depth), MAX_SCAN_DEPTH)

    def _excludes(self, c: Candidate) -> bool:
        return bool(c.entry["excludeRecursion"]) or not self.books[c.book].recursive_scanning

    def _prevents(self, c: Candidate) -> bool:
        return bool(c.entry["preventRecursion"]) or not self.books[c.book].recursive_scanning

    # -- groups, probability, budget ---------------------------------------------------------------

    def groups(self, matched: list[tuple[Candidate, str]]) -> list[tuple[Candidate, str]]:
        members: dict[str, list[Candidate]] = {}
        for c, _ in matched:
            for name in _group_names(c.entry):
                members.setdefault(name, []).append(c)
        losers: set[str] = set()
        for name, group in members.items():
            losers |= self._group_losers(name, group)
        return [(c, reason) for c, reason in matched if c.entry_id not in losers]

    def _group_losers(self, name: str, group: list[Candidate]) -> set[str]:
        ids = {c.entry_id for c in group}
        if name in self.accepted_groups:
            return ids
        if self.settings.use_group_scoring or any(c.entry["useGroupScoring"] for c in group):
            best = max(self._score(c) for c in group)
            group = [c for c in group if self._score(c) == best]
        return ids - {self._winner(group).entry_id}

    def _winner(self, group: list[Candidate]) -> Candidate:
        overriding = [c for c in group if c.entry["groupOverride"]]
        if overriding:
            return min(overriding, key=lambda c: (-c.order, c.uid))
        total = sum(int(c.entry["groupWeight"]) for c in group)
        roll, cumulative = self.rng() * total, 0
        for c in group:
            cumulative += int(c.entry["groupWeight"])
            if cumulative >= roll:
                return c
        return group[-1]

    def _score(self, c: Candidate) -> int:
        e, text = c.entry, self.text(c, 0)
        primary = sum(1 for k in e["key"] if self.matches(c, k, text))
        secondary = sum(1 for k in e["keysecondary"] if self.matches(c, k, text))
        if e["selectiveLogic"] == AND_ANY:
            return primary + secondary
        if e["selectiveLogic"] == AND_ALL and secondary == len(e["keysecondary"]):
            return primary + secondary
        return primary

    def admit(self, c: Candidate, reason: str) -> Activated | None:
        if self.overflowed:
            self.outcome.dropped[c.entry_id] = "budget"
            return None
        e = c.entry
        if reason != STICKY and e["useProbability"] and self.rng() * 100 > e["probability"]:
            self.failed.add(c.entry_id)
            self.outcome.dropped[c.entry_id] = "probability"
            return None
        content = _strip_decorators(e["content"])
        tokens = 0 if e["ignoreBudget"] else count_tokens(content)
        return self._spend(c, reason, content, tokens)

    def _spend(self, c: Candidate, reason: str, content: str, tokens: int) -> Activated | None:
        book = self.books[c.book]
        if book.token_budget and self.book_used[c.book] + tokens > book.token_budget:
            self.outcome.dropped[c.entry_id] = "budget-book"
            return None
        if self.outcome.used_tokens + tokens > self.outcome.budget:
            self.overflowed = True
            left = self.outcome.budget - self.outcome.used_tokens
            if not self.settings.truncate_over_budget or left <= 0:
                self.outcome.dropped[c.entry_id] = "budget"
                return None
            content, tokens = _cut(content, left), left
            return self._accept(c, reason, content, tokens, truncated=True)
        return self._accept(c, reason, content, tokens)

    def _accept(
        self, c: Candidate, reason: str, content: str, tokens: int, *, truncated: bool = False
    ) -> Activated:
        self.book_used[c.book] += tokens
        self.outcome.used_tokens += tokens
        self.accepted.add(c.entry_id)
        self.accepted_groups.update(_group_names(c.entry))
        activated = Activated(c, reason, tokens, content, truncated)
        self.outcome.activated.append(activated)
        return activated


def _cut(content: str, tokens: int) -> str:
    """The longest prefix of `content` within `tokens` (SillyTavern's 3.5 characters each)."""
    chars = int(tokens * 3.5)
    while chars > 0 and count_tokens(content[:chars]) > tokens:
        chars -= 1
    return content[:chars]


# --- timed effects --------------------------------------------------------------------------------

STICKY = "sticky"
COOLDOWN = "cooldown"


def timed_effects(
    found: Sequence[Candidate], past: Sequence[tuple[int, Sequence[str]]], now: int
) -> dict[str, str]:
    """Entry id -> `sticky` or `cooldown` at message count `now`, from earlier activations."""
    timers = {
        c.entry_id: (int(c.entry["sticky"] or 0), int(c.entry["cooldown"] or 0)) for c in found
    }
    started: dict[str, int] = {}
    for at, ids in past:
        if at >= now:
            continue
        for entry_id in ids:
            if entry_id in timers and _state(timers[entry_id], started.get(entry_id), at) is None:
                started[entry_id] = at
    states = {i: _state(timers[i], start, now) for i, start in started.items()}
    return {i: state for i, state in states.items() if state is not None}


def _state(timer: tuple[int, int], start: int | None, now: int) -> str | None:
    """What an effect started at message count `start` is at `now` (None: nothing)."""
    if start is None:
        return None
    sticky, cooldown = timer
    since = now - start
    if since <= sticky and since > 0:
        return STICKY
    if sticky < since <= sticky + cooldown:
        return COOLDOWN
    return None


# --- matching -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScanText:
    """The scan text and its lower-cased form (computed once, not once per key)."""

    raw: str
    lower: str

    @classmethod
    def of(cls, raw: str) -> ScanText:
        return cls(raw, raw.lower())


def key_matches(key: str, text: str, case_sensitive: bool, whole_words: bool) -> bool:
    """One key against the scan text (regex keys ignore the case and whole-word settings)."""
    if not key:
        return False
    pattern = _regex(key)
    if pattern is not None:
        return pattern.search(text) is not None
    if not case_sensitive:
        key, text = key.lower(), text.lower()
    return _key_in(key, text, whole_words)


def _key_in(key: str, text: str, whole_words: bool) -> bool:
    if not key:
        return False
    if key not in text:  # cheap, and most keys are absent
        return False
    if whole_words and " " not in key.strip():
        return _whole_word(key, text)
    return True


def _whole_word(key: str, text: str) -> bool:
    """`key` with a non-word character (or the text's end) on both sides. JavaScript's `\\W`
    is ASCII-only, so CJK around a key counts as a boundary, as it does in SillyTavern."""
    at = text.find(key)
    while at >= 0:
        end = at + len(key)
        if (at == 0 or text[at - 1] not in _WORD_CHARS) and (
            end == len(text) or text[end] not in _WORD_CHARS
        ):
            return True
        at = text.find(key, at + 1)
    return False


@lru_cache(maxsize=4096)
def _regex(key: str) -> re.Pattern[str] | None:
    found = _REGEX_KEY.match(key)
    if found is None:
        return None
    flags = 0
    flags |= re.IGNORECASE if "i" in found.group(2) else 0
    flags |= re.MULTILINE if "m" in found.group(2) else 0
    flags |= re.DOTALL if "s" in found.group(2) else 0
    try:
        return re.compile(found.group(1), flags)
    except re.error:
        return None


def _logic(logic: int, hits: int, total: int) -> bool:
    if logic == NOT_ALL:
        return hits < total
    if logic == NOT_ANY:
        return hits == 0
    if logic == AND_ALL:
        return hits == total
    return hits > 0


def _pick(entry_value: bool | None, default: bool) -> bool:
    return default if entry_value is None else bool(entry_value)


def _render(message: Message, include_names: bool) -> str:
    return f"{message.name}: {message.text}" if include_names and message.name else message.text


def _group_names(entry: dict[str, Any]) -> list[str]:
    return [g.strip() for g in str(entry.get("group") or "").split(",") if g.strip()]


def _decorator(content: str) -> bool | None:
    """True for `@@activate`, False for `@@dont_activate`, None when undecorated."""
    if not content.startswith("@@"):
        return None
    for line in content.split("\n"):
        if not line.startswith("@@"):
            break
        if line.strip() == "@@activate":
            return True
        if line.strip() == "@@dont_activate":
            return False
    return None


def _strip_decorators(content: str) -> str:
    if not content.startswith("@@"):
        return content
    lines = content.split("\n")
    while lines and lines[0].strip() in ("@@activate", "@@dont_activate"):
        lines.pop(0)
    return "\n".join(line for line in lines if not line.startswith("@@@"))
