"""The repeat-tool-reminder guard: notices when the model repeats the same call.

State lives in memory only, one chain per agent; only a human message resets it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

GENTLE_TEXT = (
    "You are repeating the exact same tool call with identical arguments. Carefully analyze the "
    "previous result before calling again: if the task is not complete, try a different approach "
    "or different arguments instead of repeating the call."
)
DETAILED_TAIL = (
    "The repeated calls are not making progress. Do not call this tool with these exact "
    "arguments again. Inspect the latest result and choose a different action, different "
    "arguments, or finish the task if enough evidence has been gathered."
)


def deep_key_sort(value: Any) -> Any:
    """Objects get their keys sorted recursively; arrays keep their order."""
    if isinstance(value, dict):
        return {k: deep_key_sort(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [deep_key_sort(v) for v in value]
    return value


def canonical_arguments(raw: str) -> str:
    """The canonical JSON of a call's arguments; a non-JSON string canonicalises as a string."""
    try:
        try:
            parsed: Any = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            parsed = raw
        return json.dumps(deep_key_sort(parsed), separators=(",", ":"), ensure_ascii=False)
    except RecursionError:  # nested too deep to parse or normalise: the raw text is the key
        return json.dumps(raw, ensure_ascii=False)


def _pattern(glob: str) -> re.Pattern[str]:
    return re.compile("^" + ".*".join(re.escape(part) for part in glob.split("*")) + "$")


@dataclass(frozen=True)
class GuardConfig:
    thresholds: tuple[int, ...] = (3, 5, 8)
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    arguments_preview_chars: int = 500

    def __post_init__(self) -> None:
        if not self.thresholds or any(t < 2 for t in self.thresholds):
            raise ValueError("thresholds must be non-empty integers >= 2")
        if len(set(self.thresholds)) != len(self.thresholds):
            raise ValueError("thresholds must not repeat")
        if self.arguments_preview_chars < 1:
            raise ValueError("arguments_preview_chars must be >= 1")
        object.__setattr__(self, "thresholds", tuple(sorted(self.thresholds)))

    def tracks(self, tool: str) -> bool:
        included = not self.include or any(_pattern(p).match(tool) for p in self.include)
        return included and not any(_pattern(p).match(tool) for p in self.exclude)


@dataclass
class RepeatGuard:
    """Counts consecutive identical calls per agent and says when to remind."""

    config: GuardConfig = field(default_factory=GuardConfig)
    _chains: dict[str, tuple[str, int]] = field(default_factory=dict)

    def observe(self, agent_id: str, tool: str, raw_arguments: str) -> str | None:
        """Record one call (rejected and failed ones count); return a reminder text or None."""
        if not self.config.tracks(tool):
            return None
        canonical = canonical_arguments(raw_arguments)
        key = json.dumps([tool, canonical], ensure_ascii=False)
        last_key, count = self._chains.get(agent_id, ("", 0))
        count = count + 1 if last_key == key else 1
        self._chains[agent_id] = (key, count)
        if count not in self.config.thresholds:
            return None
        if count == self.config.thresholds[0]:
            return GENTLE_TEXT
        return self._detailed(tool, count, canonical)

    def _detailed(self, tool: str, count: int, canonical: str) -> str:
        cap = self.config.arguments_preview_chars
        preview = canonical
        if len(canonical) > cap:
            preview = f"{canonical[:cap]}… (+{len(canonical) - cap} more chars)"
        return (
            f"Repeated tool call detected:\n- tool: {tool}\n- consecutive_calls: {count}\n"
            f"- arguments: {preview}\n{DETAILED_TAIL}"
        )

    def human_message(self, agent_id: str) -> None:
        """A human prompt or steering message resets the agent's chain."""
        self._chains.pop(agent_id, None)
