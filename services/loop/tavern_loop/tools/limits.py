"""Limits of the tool pipeline: sizes, calls per turn, concurrency, and the timeout policy."""

from __future__ import annotations

from dataclasses import dataclass

from tavern_loop.tools.base import ToolSpec

CUT_MARKER = "\n\n[... output truncated: {omitted} bytes omitted, the limit is {limit} bytes ...]"


@dataclass(frozen=True)
class ToolLimits:
    max_argument_bytes: int = 100_000
    max_calls_per_turn: int = 64
    max_parallel: int = 10
    default_timeout_s: float = 60.0
    """The deadline of a tool whose spec declares none."""
    max_result_bytes: int = 200_000
    """Hard limit on a result that spill did not bound (spill disabled, failed or exempt)."""
    cancel_grace_s: float = 2.0
    """How long started calls may run on after a cancel before they are aborted."""

    def __post_init__(self) -> None:
        if self.max_parallel < 1 or self.max_calls_per_turn < 0:
            raise ValueError("max_parallel must be >= 1 and max_calls_per_turn >= 0")
        if self.default_timeout_s <= 0 or self.cancel_grace_s < 0:
            raise ValueError("default_timeout_s must be > 0 and cancel_grace_s >= 0")
        if self.max_result_bytes < 200 or self.max_argument_bytes < 0:
            raise ValueError("max_result_bytes must be >= 200 and max_argument_bytes >= 0")


@dataclass
class TurnBudget:
    """Tool calls started in one turn, counted across the steps of that turn."""

    calls_started: int = 0


def timeout_for(spec: ToolSpec, limits: ToolLimits) -> float:
    """The timeout policy: the spec's own deadline, else the pipeline's default."""
    return spec.timeout_s if spec.timeout_s is not None else limits.default_timeout_s


def timeout_ms(seconds: float) -> int:
    return round(seconds * 1000)


def result_limit(spec: ToolSpec | None, limits: ToolLimits) -> int:
    if spec is None or spec.max_result_bytes is None:
        return limits.max_result_bytes
    return min(spec.max_result_bytes, limits.max_result_bytes)


def cut_to_bytes(text: str, limit: int) -> str | None:
    """The head of `text` plus a marker, within `limit` UTF-8 bytes; None if it already fits."""
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return None
    reserve = len(CUT_MARKER.format(omitted=len(raw), limit=limit).encode("utf-8"))
    head = raw[: max(0, limit - reserve)].decode("utf-8", errors="ignore")
    omitted = len(raw) - len(head.encode("utf-8"))
    return head + CUT_MARKER.format(omitted=omitted, limit=limit)
