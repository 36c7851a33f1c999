from __future__ import annotations

import pytest

from tavern_llm.tokens import message_tokens, text_tokens
from tavern_loop.domain.pruner import MARKER, PrunerConfig, prune_text
from tavern_loop.domain.spill import needs_spill, spill_preview


def test_pruner_leaves_short_text_alone() -> None:
    assert prune_text("x" * 8192, PrunerConfig()) is None


def test_pruner_keeps_head_marker_and_tail_and_is_idempotent() -> None:
    text = "h" * 5000 + "m" * 5000 + "t" * 2000
    pruned = prune_text(text, PrunerConfig())
    assert pruned == "h" * 4096 + MARKER + "t" * 1024
    assert prune_text(pruned, PrunerConfig()) is None


def test_pruner_counts_code_points_not_bytes() -> None:
    text = "中" * 8192
    assert prune_text(text, PrunerConfig()) is None


def test_pruner_config_refuses_head_and_tail_over_threshold() -> None:
    with pytest.raises(ValueError, match="fit"):
        PrunerConfig(threshold_chars=100, head_chars=60, tail_chars=30)


def test_spill_preview_fits_the_cap_and_names_the_locator() -> None:
    text = "a" * 60_000 + "Z" * 60_000
    preview = spill_preview(text, "spill://s1/abc", 50_000)
    assert preview is not None
    assert len(preview.text.encode()) <= 50_000
    assert preview.text.startswith("a")
    assert "Z\n\n(Omitted" in preview.text
    assert "spill://s1/abc" in preview.text
    assert preview.omitted_bytes == 120_000 - len(preview.text.split("\n\n(Omitted")[0])


def test_spill_preview_never_cuts_a_multibyte_character() -> None:
    preview = spill_preview("é" * 1000, "loc", 300)
    assert preview is not None
    assert "\ufffd" not in preview.text
    assert len(preview.text.encode()) <= 300


def test_spill_preview_gives_up_when_the_notice_alone_is_too_big() -> None:
    assert spill_preview("x" * 100, "a-very-long-locator" * 10, 50) is None


def test_needs_spill_measures_utf8_bytes() -> None:
    assert needs_spill("é" * 6, 11)
    assert not needs_spill("é" * 5, 10)


def test_token_estimate_is_four_chars_per_token_plus_overheads() -> None:
    assert text_tokens("abcdefgh") == 2 + 4
    assert message_tokens({"role": "user", "content": "abcd"}) == 4 + 1 + 4
