"""Hard caps of the stores: request and result sizes, list lengths, value and scope sizes."""

from __future__ import annotations

from dataclasses import dataclass

KIB = 1024


@dataclass(frozen=True)
class StoreLimits:
    """Every cap in one place; a request beyond a cap is refused (limits are clamped)."""

    max_request_bytes: int = 320 * KIB
    max_reply_bytes: int = 256 * KIB
    deadline_s: float = 4.0
    # memory
    max_content_chars: int = 8000
    max_tags: int = 32
    max_tag_chars: int = 100
    max_query_chars: int = 2000
    max_source_ref_chars: int = 200
    search_limit_default: int = 10
    search_limit_cap: int = 50
    search_tokens_default: int = 1200
    search_tokens_cap: int = 4000
    search_candidates: int = 500
    max_ttl_s: int = 10 * 365 * 24 * 3600
    # variables
    max_value_bytes: int = 32 * KIB
    max_scope_bytes: int = 256 * KIB
    max_value_depth: int = 32
    max_patch_changes: int = 32
    list_limit_default: int = 50
    list_limit_cap: int = 100
    max_prefix_chars: int = 64
    summary_chars: int = 80

    def __post_init__(self) -> None:
        if self.max_value_bytes > self.max_scope_bytes:
            raise ValueError("a value cannot be larger than its scope")
        if self.deadline_s <= 0:
            raise ValueError("deadline_s must be > 0")


def clamp(value: int | None, *, default: int, cap: int) -> int:
    """A limit asked for by a caller: the default when absent, else within [1, cap]."""
    if value is None:
        return default
    return max(1, min(value, cap))
