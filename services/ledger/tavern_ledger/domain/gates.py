"""The write gate: every write into the ledger (ingestion, rights operations, observations, the
memory store) passes here, in acp.md §6's order, first blocking finding wins:

domain claim -> size -> credentials (block) -> prompt injection (quarantine) -> sensitivity
-> private data (quarantine or redact, per `GateConfig.private_data`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from tavern_ledger.domain.patterns import (
    find_injections,
    find_private,
    find_secrets,
    normalise,
    redact_spans,
)
from tavern_ledger.domain.vocabulary import CLAIM_DOMAINS

GateAction = Literal["allow", "redact", "quarantine", "block"]
PrivateDataPolicy = Literal["quarantine", "redact"]

_ALL_DOMAINS = frozenset(CLAIM_DOMAINS)
_NOT_PROFILE = frozenset({"user_fact", "work", "experience", "external_fact"})
WRITE_DOMAINS: Mapping[str, frozenset[str]] = {
    "system": _ALL_DOMAINS,
    "user_input": _ALL_DOMAINS,
    "user_correction": _ALL_DOMAINS,
    "external_tool": _NOT_PROFILE,
    "agent_authored": _NOT_PROFILE,
    "observation": _ALL_DOMAINS,
}
"""Which claim domains each source class may write (acp.md §4.2); `observation` is the
consolidator's distilled track, whose domain follows its evidence."""


@dataclass(frozen=True)
class GateConfig:
    """The deployment's write-gate policy."""

    private_data: PrivateDataPolicy = "quarantine"
    max_chars: int = 8000


@dataclass(frozen=True)
class GateVerdict:
    action: GateAction
    reasons: tuple[str, ...]
    """Why, e.g. `("secret:aws_access_key",)`; empty for allow."""
    text: str
    """The text to store (redacted when action == "redact"; empty when blocked)."""

    @property
    def stored(self) -> bool:
        return self.action != "block"

    @property
    def flags(self) -> tuple[str, ...]:
        """The kinds of finding (`secret`, `injection`, `pii`...), for facts and audits."""
        return tuple(dict.fromkeys(r.partition(":")[0] for r in self.reasons))


def write_gate(
    text: str,
    *,
    source_class: str,
    claim_domain: str,
    config: GateConfig = GateConfig(),
    sensitivity: str = "private",
) -> GateVerdict:
    """Decide what happens to one write; never raises on content."""
    folded = normalise(text) if isinstance(text, str) else ""
    blocked = _blocking(text, folded, source_class, claim_domain, config, sensitivity)
    if blocked:
        return GateVerdict("block", blocked, "")
    injections = tuple(f"injection:{name}" for name in find_injections(text, folded))
    sensitive = _sensitive_source(source_class, sensitivity)
    spans = find_private(text)
    private = tuple(dict.fromkeys(f"pii:{s.kind}" for s in spans))
    stored = redact_spans(text, spans) if spans and config.private_data == "redact" else text
    if injections or sensitive:
        return GateVerdict("quarantine", injections + sensitive + private, stored)
    if private:
        action: GateAction = "redact" if config.private_data == "redact" else "quarantine"
        return GateVerdict(action, private, stored)
    return GateVerdict("allow", (), text)


def _blocking(
    text: str,
    folded: str,
    source_class: str,
    claim_domain: str,
    config: GateConfig,
    sensitivity: str,
) -> tuple[str, ...]:
    """The reasons a write must store nothing at all (empty: it may be stored)."""
    allowed = WRITE_DOMAINS.get(source_class)
    if allowed is None:
        return (f"source:unknown_source_class:{source_class}",)
    if claim_domain not in allowed:
        return (f"domain:{source_class}_cannot_claim_{claim_domain}",)
    if not isinstance(text, str) or not text.strip():
        return ("size:empty",)
    if len(text) > config.max_chars:
        return (f"size:over_{config.max_chars}_chars",)
    secrets = find_secrets(text, folded)
    if secrets:
        return tuple(f"secret:{name}" for name in secrets)
    if sensitivity == "secret":
        return ("sensitivity:secret",)
    return ()


def _sensitive_source(source_class: str, sensitivity: str) -> tuple[str, ...]:
    if sensitivity == "sensitive" and source_class == "external_tool":
        return ("sensitivity:sensitive_external_tool",)
    return ()
