"""The model-free tool-result pruner: keep the head and tail of a long result, drop the middle."""

from __future__ import annotations

from dataclasses import dataclass

MARKER = "\n\n[... tool result middle pruned ...]\n\n"


@dataclass(frozen=True)
class PrunerConfig:
    threshold_chars: int = 8192
    head_chars: int = 4096
    tail_chars: int = 1024

    def __post_init__(self) -> None:
        if self.threshold_chars <= 0 or self.head_chars < 0 or self.tail_chars < 0:
            raise ValueError("threshold must be > 0, head and tail >= 0")
        if self.head_chars + len(MARKER) + self.tail_chars > self.threshold_chars:
            raise ValueError("head + marker + tail must fit within the threshold")


def prune_text(text: str, config: PrunerConfig) -> str | None:
    """The pruned text, or None when `text` is within the threshold (a second pass is a no-op).

    Python strings index by code point, which is the unit the threshold is measured in.
    """
    if len(text) <= config.threshold_chars:
        return None
    tail = text[len(text) - config.tail_chars :] if config.tail_chars else ""
    return text[: config.head_chars] + MARKER + tail
