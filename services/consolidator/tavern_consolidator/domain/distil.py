"""Distillation (acp.md §12.4): the prompt, the strict output schema, parsing (a truncated or
invalid reply is a failure, never a partial success) and the rule fallback used only when no
model is reachable."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema

from tavern_consolidator.domain.records import Evidence, Proposed
from tavern_consolidator.domain.vocabulary import CLAIM_DOMAINS

MAX_OBSERVATIONS = 8
"""Hard limit of the schema; the prompt asks for at most 3."""
MAX_SUBJECT_CHARS = 40
MAX_TEXT_CHARS = 500
PROMPT_CONTENT_CHARS = 400
FALLBACK_PREDICATE = "states"

OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["observations"],
    "properties": {
        "observations": {
            "type": "array",
            "maxItems": MAX_OBSERVATIONS,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["subject", "predicate", "claimDomain", "text", "evidenceIds"],
                "properties": {
                    "subject": {"type": "string", "pattern": r"\S"},
                    "predicate": {"type": "string", "pattern": r"\S"},
                    "claimDomain": {"enum": list(CLAIM_DOMAINS)},
                    "text": {"type": "string", "pattern": r"\S"},
                    "evidenceIds": {"type": "array", "items": {"type": "string", "minLength": 1}},
                },
            },
        }
    },
}
_VALIDATOR = jsonschema.Draft202012Validator(OUTPUT_SCHEMA)

SYSTEM_PROMPT = "\n".join(
    [
        "You distil durable observations about the user from evidence records.",
        "Return ONLY one JSON object with exactly this shape:",
        '{"observations":[{"subject":"...","predicate":"...","claimDomain":"...",'
        '"text":"...","evidenceIds":["..."]}]}',
        f"claimDomain is one of: {', '.join(CLAIM_DOMAINS)}.",
        "style = how the user wants answers written; user_preference = what the user prefers.",
        "subject: at most 20 characters; predicate: a short relation (prefers, uses, works_on);",
        "text: at most 120 characters (Chinese: at most 60 characters).",
        "An observation inherits the WEAKEST authority of the evidence it cites.",
        "Every observation MUST list at least one evidenceId taken from the records.",
        "Output AT MOST 3 observations: merge related records; never one per record;",
        "do not copy evidence text verbatim; never invent facts.",
        "NEVER emit action transcripts (what was just done, retried, restarted).",
        "Only durable conclusions. If the batch holds only such action logs, "
        'output {"observations":[]}.',
    ]
)


@dataclass(frozen=True)
class Distilled:
    observations: tuple[Proposed, ...]
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Rejected:
    """Why a model reply is not a distillation (`truncated`, `parse_failed`, `schema_invalid`)."""

    reason: str
    detail: str = ""

    @property
    def error(self) -> str:
        return f"{self.reason}: {self.detail}" if self.detail else self.reason


def prompt_content(text: str) -> str:
    if len(text) <= PROMPT_CONTENT_CHARS:
        return text
    return f"{text[:PROMPT_CONTENT_CHARS]}…[truncated {len(text)} chars]"


def build_messages(batch: Sequence[Evidence]) -> list[dict[str, str]]:
    records = [
        {"id": e.id, "claimDomain": e.claim_domain, "content": prompt_content(e.text)}
        for e in batch
    ]
    user = "Evidence records (JSON):\n" + json.dumps(records, ensure_ascii=False)
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


_FENCE = re.compile(r"^\s*```(?:json)?\s*\n(.*)\n\s*```\s*$", re.DOTALL)


def _json_text(text: str) -> str:
    """The JSON document of a reply: a whole-reply code fence is removed, prose around the one
    object is cut (first `{` to last `}`)."""
    fenced = _FENCE.match(text)
    body = fenced.group(1) if fenced else text
    start, end = body.find("{"), body.rfind("}")
    return body[start : end + 1] if 0 <= start < end else body


def parse(text: str, finish_reason: str, batch_ids: frozenset[str]) -> Distilled | Rejected:
    """The reply's observations, all valid, or why the whole reply is rejected."""
    if finish_reason == "length":
        return Rejected("truncated", "the model stopped at its output limit")
    try:
        data = json.loads(_json_text(text))
    except ValueError as exc:
        return Rejected("parse_failed", str(exc)[:200])
    error = next(iter(_VALIDATOR.iter_errors(data)), None)
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "reply"
        return Rejected("schema_invalid", f"{where}: {error.message}"[:300])
    return _observations(data["observations"], batch_ids)


def _observations(items: list[dict[str, Any]], batch_ids: frozenset[str]) -> Distilled | Rejected:
    found, warnings = [], []
    for index, item in enumerate(items):
        ids = tuple(dict.fromkeys(str(i).strip() for i in item["evidenceIds"]))
        unknown = [i for i in ids if i not in batch_ids]
        if unknown:
            return Rejected(
                "schema_invalid", f"observations/{index}: unknown evidence {unknown[0]}"
            )
        if not ids:
            warnings.append(f"observation_without_backlink:{index}")
        found.append(_proposed(item, ids))
    return Distilled(tuple(found), tuple(warnings))


def _proposed(item: dict[str, Any], ids: tuple[str, ...]) -> Proposed:
    return Proposed(
        subject=str(item["subject"]).strip()[:MAX_SUBJECT_CHARS],
        predicate=str(item["predicate"]).strip()[:MAX_SUBJECT_CHARS],
        claim_domain=str(item["claimDomain"]),
        text=str(item["text"]).strip()[:MAX_TEXT_CHARS],
        evidence_ids=ids,
    )


def fallback(batch: Sequence[Evidence]) -> tuple[Proposed, ...]:
    """The rule fallback: one observation per evidence, keyed by its first 40 characters."""
    return tuple(
        Proposed(
            subject=e.text.strip()[:MAX_SUBJECT_CHARS],
            predicate=FALLBACK_PREDICATE,
            claim_domain=e.claim_domain,
            text=e.text.strip()[:MAX_TEXT_CHARS],
            evidence_ids=(e.id,),
        )
        for e in batch
        if e.text.strip()
    )


@dataclass(frozen=True)
class Attempt:
    """One model call: `ok` (with a distillation), `rejected` (a reply that is not one),
    `failed` (an error after the model was reached) or `unreachable` (no answer at all)."""

    outcome: str
    error: str = ""
    distilled: Distilled | None = None


ATTEMPTS = 2


def settle(attempts: Sequence[Attempt]) -> str:
    """`model` if an attempt distilled, `fallback` if no model could be reached at all,
    else `failed` (the watermark stays and the same batch is retried later)."""
    if any(a.outcome == "ok" for a in attempts):
        return "model"
    if attempts and all(a.outcome == "unreachable" for a in attempts):
        return "fallback"
    return "failed"


def failure_text(attempts: Sequence[Attempt]) -> str:
    return "; ".join(a.error for a in attempts if a.error)[:1000]
