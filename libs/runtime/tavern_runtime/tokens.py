"""The one model-free token estimate of AgentTavern, and its calibration per model.

An estimate counts each CJK character (Chinese, Japanese kana, Korean hangul, CJK
punctuation and full-width forms) as one token and every other character as a fraction of one
(`OTHER_RATE`, four characters a token by default; the ledger's recall budget uses acp.md
§9.4's 0.3). A flat `len(text) / 4` undercounts Chinese by a factor of three to four.

`Calibration` learns, per model, how the estimate compares with the `usage` the provider
reports, and scales later estimates for that model by it. Pure: no IO, no clock.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

OTHER_RATE = 0.25
"""Tokens per non-CJK character: about four characters a token for English and code."""

_CJK = re.compile(
    "[\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
    "\uff00-\uffef\U00020000-\U0002fa1f]"
)


def cjk_chars(text: str) -> int:
    return len(_CJK.findall(text))


def is_cjk(char: str) -> bool:
    return _CJK.match(char) is not None


def estimate_tokens(text: str, other_rate: float = OTHER_RATE) -> int:
    """ceil(1 per CJK character + `other_rate` per other character); 0 for ""."""
    cjk = cjk_chars(text)
    return math.ceil(cjk + (len(text) - cjk) * other_rate)


SMOOTHING = 0.2
"""Weight of the newest observation in a model's running ratio."""
MIN_RATIO, MAX_RATIO = 0.25, 4.0
"""A report outside these bounds of the estimate is a misreport (or a cached prompt), not a
tokenizer: it is clamped so one odd reply cannot swing every later budget."""


@dataclass
class Calibration:
    """Per model: the running ratio of reported prompt tokens to estimated ones."""

    ratios: dict[str, float] = field(default_factory=dict)
    seen: dict[str, int] = field(default_factory=dict)

    def observe(self, model: str, estimated: int, reported: int) -> None:
        """One request: what was estimated for its prompt and what the provider reported."""
        if estimated <= 0 or reported <= 0:
            return
        ratio = min(MAX_RATIO, max(MIN_RATIO, reported / estimated))
        previous = self.ratios.get(model)
        self.ratios[model] = (
            ratio if previous is None else previous + SMOOTHING * (ratio - previous)
        )
        self.seen[model] = self.seen.get(model, 0) + 1

    def ratio(self, model: str) -> float:
        return self.ratios.get(model, 1.0)

    def calibrated(self, model: str, estimate: int) -> int:
        """`estimate` scaled by what `model` has reported so far (unchanged before any)."""
        return math.ceil(estimate * self.ratio(model))
