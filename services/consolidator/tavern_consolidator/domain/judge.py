"""A model's judgement of a new claim of fact against the same person's earlier ones (as Mem0's
ADD/UPDATE/DELETE): which earlier claims to show it, the one prompt, and the strict reading of
its JSON answer. Pure; `judge.py` asks the model and the ledger ends what it judged."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from tavern_consolidator.domain.text import bigrams, jaccard

MAX_RELATED = 5
"""Earlier claims shown to the model per new claim: the most similar by shared words."""
MIN_SIMILARITY = 0.15
"""Below this share of character pairs an earlier claim is not about the same thing."""
MAX_CLAIM_CHARS = 500

Decision = Literal["add", "update", "contradict"]
DECISIONS: tuple[str, ...] = ("add", "update", "contradict")
_FENCE = re.compile(r"^\s*```[a-zA-Z]*\s*\n(.*)\n\s*```\s*$", re.DOTALL)

SYSTEM = (
    "You keep a person's memory. You get one NEW statement the person just made and a few "
    "EARLIER statements of theirs, each with a label. Decide whether the new statement only "
    "ADDs information (the earlier ones stay true), UPDATEs earlier ones (the same fact with a "
    "new value: they are no longer current), or CONTRADICTs earlier ones (they were wrong). "
    "Name only earlier statements the new one replaces; statements about other things stay. "
    'Answer with one JSON object and nothing else: {"decision": "add"|"update"|"contradict", '
    '"replaces": [labels], "reason": "<a few words>"}. For add, replaces is [].'
)


@dataclass(frozen=True)
class Claim:
    """A copy of one claim of fact, as the judgement sees it."""

    id: str
    scope_id: str
    speaker: str
    text: str
    observed_at: datetime
    claim_of: str | None = None


@dataclass(frozen=True)
class Judged:
    """What the model decided: the earlier claims the new one replaces (none for add)."""

    decision: Decision
    replaces: tuple[str, ...]
    reason: str = ""


@dataclass(frozen=True)
class Unusable:
    """An answer that is not applied, and why (logged)."""

    why: str


def related(new: Claim, earlier: Sequence[Claim], limit: int = MAX_RELATED) -> list[Claim]:
    """The earlier claims of the same speaker and scope, said before and not in the same
    message, that share the most words with `new` (at least `MIN_SIMILARITY`)."""
    words = bigrams(new.text)
    scored = [(jaccard(words, bigrams(c.text)), c) for c in earlier if _comparable(new, c)]
    ranked = sorted(
        (sc for sc in scored if sc[0] >= MIN_SIMILARITY),
        key=lambda sc: (-sc[0], sc[1].observed_at, sc[1].id),
    )
    return [c for _, c in ranked[:limit]]


def _comparable(new: Claim, other: Claim) -> bool:
    return (
        other.id != new.id
        and other.scope_id == new.scope_id
        and other.speaker == new.speaker
        and other.observed_at < new.observed_at
        and (other.claim_of is None or other.claim_of != new.claim_of)
    )


def labels(candidates: Sequence[Claim]) -> dict[str, str]:
    """Label -> claim id (`E1`, `E2`, ...): the model names labels, never raw ids."""
    return {f"E{i}": c.id for i, c in enumerate(candidates, start=1)}


def prompt(new: Claim, candidates: Sequence[Claim]) -> list[dict[str, str]]:
    """The chat messages of one judgement."""
    earlier = [
        {"label": label, "text": c.text[:MAX_CLAIM_CHARS]}
        for label, c in zip(labels(candidates), candidates, strict=True)
    ]
    body = {"new": new.text[:MAX_CLAIM_CHARS], "earlier": earlier}
    user = "Statements (JSON):\n" + json.dumps(body, ensure_ascii=False)
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def parse(text: str, candidates: Sequence[Claim]) -> Judged | Unusable:
    """The model's answer, read strictly: a known decision, and for update or contradict one or
    more labels of the shown claims; anything else is unusable and nothing is applied."""
    data = _object(text)
    if isinstance(data, Unusable):
        return data
    decision, named = data.get("decision"), data.get("replaces", [])
    if not isinstance(decision, str) or decision.lower() not in DECISIONS:
        return Unusable(f"unknown decision {str(decision)[:40]!r}")
    if not isinstance(named, list) or not all(isinstance(n, str) for n in named):
        return Unusable("replaces is not a list of labels")
    known = labels(candidates)
    unknown = [n for n in named if n not in known]
    if unknown:
        return Unusable(f"unknown label {unknown[0][:40]!r}")
    reason = data.get("reason")
    why = reason.strip()[:200] if isinstance(reason, str) else ""
    verdict: Decision = decision.lower()  # type: ignore[assignment]
    if verdict == "add":
        return Judged("add", (), why)
    if not named:
        return Unusable(f"{verdict} names no earlier claim")
    return Judged(verdict, tuple(dict.fromkeys(known[n] for n in named)), why)


def _object(text: str) -> dict[str, Any] | Unusable:
    fenced = _FENCE.match(text)
    body = fenced.group(1) if fenced else text
    try:
        data = json.loads(body.strip())
    except ValueError as exc:
        return Unusable(f"not JSON: {str(exc)[:100]}")
    return data if isinstance(data, dict) else Unusable("not a JSON object")
