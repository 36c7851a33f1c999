"""Upcast-on-read: pure dict-to-dict functions keyed by (type, from_version).

`decode` runs the chain from a stored event's `v` up to the current version before validation,
so only the current shape lives in the models. Every version bump registers an upcaster here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tavern_events.errors import ContractError

RawEvent = dict[str, Any]
Upcaster = Callable[[RawEvent], RawEvent]

UPCASTERS: dict[tuple[str, int], Upcaster] = {}


def upcaster(event_type: str, from_version: int) -> Callable[[Upcaster], Upcaster]:
    """Register `fn` as the step `event_type` v`from_version` -> v`from_version + 1`."""

    def register(fn: Upcaster) -> Upcaster:
        key = (event_type, from_version)
        if key in UPCASTERS:
            raise ValueError(f"duplicate upcaster for {event_type} v{from_version}")
        UPCASTERS[key] = fn
        return fn

    return register


def upcast(raw: RawEvent, event_type: str, version: int, current: int) -> RawEvent:
    """Apply every step from `version` to `current`; the input dict is never mutated."""
    for step in range(version, current):
        fn = UPCASTERS.get((event_type, step))
        if fn is None:
            raise ContractError(f"no upcaster for {event_type} v{step} -> v{step + 1}")
        raw = {**_apply(fn, raw, event_type, step), "v": step + 1}
    return raw


def _apply(fn: Upcaster, raw: RawEvent, event_type: str, step: int) -> RawEvent:
    try:
        return fn(raw)
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise ContractError(f"cannot upcast {event_type} v{step}: {exc}") from exc


def missing_steps(current_versions: dict[str, int]) -> list[tuple[str, int]]:
    """The (type, from_version) steps a complete chain would need but nobody registered."""
    return [
        (event_type, step)
        for event_type, current in sorted(current_versions.items())
        for step in range(1, current)
        if (event_type, step) not in UPCASTERS
    ]


@upcaster("session/created", 1)
def session_created_v1(raw: RawEvent) -> RawEvent:
    """v1 had no context mode: an agent-tavern binding without one reads as `dsh-native`."""
    payload = raw.get("payload")
    if not isinstance(payload, dict) or payload.get("architecture") != "agent-tavern":
        return raw  # nothing to migrate; validation judges the rest
    if payload.get("context_mode") is not None:
        return raw
    return {**raw, "payload": {**payload, "context_mode": "dsh-native"}}
