"""The composer: utility (acp.md §9.3), isolation, self-echo, dedupe, quotas, rendering."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from tavern_ledger.domain.composer import (
    CROSS_SESSION_NOTICE,
    Candidate,
    ComposerConfig,
    Query,
    compose,
    render,
    rrf_scores,
    utility,
)
from tavern_ledger.domain.ranking import CorpusStats

NOW = datetime(2026, 5, 1, 12, tzinfo=UTC)


def cand(cid: str, content: str, **kw: object) -> Candidate:
    base: dict[str, object] = {
        "id": cid,
        "content": content,
        "content_hash": f"h-{cid}",
        "source_class": "user_input",
        "label": "user",
        "scope_id": "c1",
        "authority": "user_explicit",
        "claim_domain": "user_fact",
        "session_id": "s1",
        "confidence": 0.9,
        "observed_at": NOW,
    }
    return Candidate(**{**base, **kw})  # type: ignore[arg-type]


def query(text: str = "tea", **kw: object) -> Query:
    base: dict[str, object] = {"text": text, "session_id": "s1", "scope_id": "c1", "now": NOW}
    return Query(**{**base, **kw})  # type: ignore[arg-type]


def ids(result: object) -> list[str]:
    return [s.candidate.id for s in result.items]  # type: ignore[attr-defined]


def test_utility_formula() -> None:
    value = utility(cand("a", "I like tea"), query("tea"), ComposerConfig(), None)
    # relevance 0.5*1 + 0.12*1 + 0.10*0.9 + 0.07*1 = 0.78; quality 0.95
    assert value == pytest.approx(0.78 * 0.95)
    correction = cand("b", "I like tea", source_class="user_correction")
    assert utility(correction, query("tea"), ComposerConfig(), None) == pytest.approx(
        0.78 * 0.95 + 0.3
    )
    old = cand("c", "I like tea", observed_at=NOW - timedelta(days=60))
    assert utility(old, query("tea"), ComposerConfig(), None) == pytest.approx(0.71 * 0.95)


def test_relevant_items_rank_first_and_render_as_labelled_lines() -> None:
    result = compose(
        [cand("a", "The sky is blue"), cand("b", "I like green tea", label="user")],
        query("which tea do I like"),
    )
    assert ids(result) == ["b", "a"]
    assert render(result.items).splitlines()[0] == "- [user] I like green tea"


def test_unreadable_candidates_are_dropped_with_reasons() -> None:
    result = compose(
        [
            cand("q", "tea", state="quarantined"),
            cand("r", "tea", state="redacted"),
            cand("s", "tea", state="superseded"),
            cand("x", "tea", scope_id="other"),
            cand("i", "tea", authority="agent_inference", claim_domain="experience"),
        ],
        query("tea?"),
    )
    assert result.items == ()
    assert dict(result.dropped) == {
        "q": "state not injectable",
        "r": "state not injectable",
        "s": "superseded by newer evidence",
        "x": "scope mismatch",
        "i": "authority not permitted for target domain: experience",
    }


@pytest.mark.parametrize(
    ("policy", "kept"),
    [
        ("non-instructional", ["tool", "user"]),
        ("all", ["directive", "tool", "user"]),
        ("none", []),
    ],
)
def test_cross_session_policy_keeps_other_sessions_directives_out(
    policy: str, kept: list[str]
) -> None:
    other = [
        cand("user", "tea is my drink", session_id="s2"),
        cand(
            "directive",
            "From now on always answer about tea in French",
            session_id="s2",
            claim_domain="style",
        ),
        cand(
            "tool",
            "tea prices rose",
            session_id="s2",
            source_class="external_tool",
            authority="external_information",
            claim_domain="external_fact",
            label="tool:web",
        ),
    ]
    result = compose(other, query("tea"), ComposerConfig(cross_session=policy))  # type: ignore[arg-type]
    assert sorted(ids(result)) == sorted(kept)
    assert all(s.cross_session for s in result.items)


def test_cross_session_items_are_penalised_and_marked() -> None:
    mine = cand(
        "mine",
        "tea notes",
        source_class="external_tool",
        authority="external_information",
        claim_domain="external_fact",
        label="tool:x",
    )
    theirs = replace(mine, id="theirs", content_hash="h2", session_id="session-abcdef123")
    result = compose([theirs, mine], query("tea"))
    assert ids(result) == ["mine", "theirs"]
    assert result.items[1].utility == pytest.approx(result.items[0].utility * 0.3)
    lines = render(result.items).splitlines()
    assert lines[1] == CROSS_SESSION_NOTICE
    assert lines[2] == "- [tool:x · earlier session abcdef12] tea notes"


def test_self_echo_and_machine_templates_are_dropped() -> None:
    result = compose(
        [cand("echo", "please remember I like tea a lot"), cand("ok", "done.", content_hash="x")],
        query("remember I like tea"),
    )
    assert dict(result.dropped) == {"echo": "self-echo", "ok": "machine-template:tool-receipt-bare"}


def test_external_tool_output_can_be_switched_off() -> None:
    tool = cand(
        "t",
        "tea",
        source_class="external_tool",
        authority="external_information",
        claim_domain="external_fact",
    )
    assert ids(compose([tool], query("tea?"), ComposerConfig(skip_external_tool=True))) == []


def test_same_content_is_injected_once() -> None:
    a = cand("a", "I like tea", content_hash="same")
    b = cand(
        "b",
        "I like tea",
        content_hash="same",
        source_class="user_correction",
        authority="user_correction",
    )
    result = compose([a, b], query("tea?"))
    assert ids(result) == ["b"]
    assert ("a", "duplicate-content") in result.dropped


def test_section_quota_and_total_budget() -> None:
    many = [
        cand(f"u{i}", f"tea fact number {i} " + "x" * 60, content_hash=f"h{i}") for i in range(10)
    ]
    result = compose(many, query("tea"))
    used = sum(s.tokens for s in result.items)
    assert 0 < used <= 180
    assert any(reason == "section 'user_model' budget" for _, reason in result.dropped)
    tight = compose(many, query("tea"), ComposerConfig(hot_tokens=60))
    assert sum(s.tokens for s in tight.items) <= 60
    assert any(reason == "total budget" for _, reason in tight.dropped)
    unlimited = compose(
        many, query("tea"), ComposerConfig(hot_tokens=0, quota={"user_model": 10_000})
    )
    assert len(unlimited.items) == 10


def test_long_tool_output_is_truncated_but_a_user_statement_is_kept_whole() -> None:
    long_text = "tea " + "word " * 400
    tool = cand(
        "t",
        long_text,
        source_class="external_tool",
        authority="external_information",
        claim_domain="external_fact",
    )
    [item] = compose([tool], query("tea")).items
    assert item.content.endswith("…[truncated; full text: t]")
    assert item.tokens <= 290
    user = cand("u", long_text)
    result = compose([user], query("tea"))
    assert result.items == ()
    assert result.dropped == (("u", "section 'user_model' budget (high-authority kept whole)"),)


def test_hysteresis_keeps_last_steps_items() -> None:
    a, b = cand("a", "tea one", content_hash="1"), cand("b", "tea two", content_hash="2")
    plain = compose([a, b], query("tea"))
    sticky = compose([a, b], query("tea", previous_ids=frozenset({"b"})))
    assert plain.items[0].utility == pytest.approx(plain.items[1].utility)
    assert ids(sticky)[0] == "b"
    assert sticky.items[0].sticky
    assert sticky.items[0].utility == pytest.approx(plain.items[0].utility * 1.2)


def test_observations_decay_by_half_life_and_evidence_does_not() -> None:
    obs = cand(
        "o",
        "tea with lemon",
        source_class="observation",
        label="observation",
        observed_at=NOW - timedelta(days=30),
    )
    fresh = replace(obs, id="o2", content_hash="o2", observed_at=NOW)
    result = compose([obs, fresh], query("tea"))
    by_id = {s.candidate.id: s.utility for s in result.items}
    undecayed = utility(obs, query("tea"), ComposerConfig(), None)
    assert by_id["o"] == pytest.approx(undecayed * 0.5)


def test_as_of_reads_superseded_rows_inside_their_window() -> None:
    t = NOW - timedelta(days=10)
    old = cand(
        "old",
        "tea with milk",
        state="superseded",
        observed_at=NOW - timedelta(days=20),
        valid_until=t,
        content_hash="o",
    )
    new = cand("new", "tea without milk", observed_at=t, valid_from=t, content_hash="n")
    assert ids(compose([old, new], query("tea"))) == ["new"]
    past = compose([old, new], query("tea", valid_at=t - timedelta(days=1)))
    assert ids(past) == ["old"]


def test_rrf_normalises_best_to_one() -> None:
    rows = [(cand("a", "tea tea"), False), (cand("b", "coffee", semantic=0.9), False)]
    scores = rrf_scores(rows, {"a": 1.0, "b": 0.0})
    assert max(scores.values()) == 1.0
    assert set(scores) == {"a", "b"}
    fused = compose(
        [r[0] for r in rows], query("tea", has_semantic=True), ComposerConfig(fusion="rrf")
    )
    assert len(fused.items) == 2


def test_rules_are_short_labelled_and_pinned_rules_boosted() -> None:
    rule = Candidate(
        id="rule_1",
        content="Answer briefly",
        source_class="rule",
        label="rule",
        scope_id="c1",
        section="rules",
        short_label=True,
        explicit_ref=True,
        pin_boost=0.5,
        confidence=0.95,
    )
    result = compose([rule], query("anything"))
    assert render(result.items) == "- [rule] Answer briefly"
    assert result.items[0].tokens == 4 + 5


def test_packing_takes_the_most_useful_items_first_not_the_shortest() -> None:
    relevant = cand("r", "my sister's pottery class is on Sunday " + "and it is lovely " * 8)
    filler = [cand(f"f{i}", f"ok {i}", content_hash=f"f{i}") for i in range(6)]
    result = compose([relevant, *filler], query("when is the pottery class", explain=True))
    assert ids(result)[0] == "r"
    assert result.ranked[0].candidate.id == "r"
    assert len(result.ranked) == 7  # every readable candidate, injected or not
    quick = compose([relevant, *filler], query("when is the pottery class"))
    assert ids(quick) == ids(result)  # the same injection without ranking everything


def test_the_speaker_comes_from_a_user_label() -> None:
    assert cand("a", "x", label="user:Caroline").speaker == "Caroline"
    assert cand("b", "x", label="user").speaker is None
    assert cand("c", "x", label="tool:web").speaker is None


def test_the_scope_statistics_and_neighbours_shape_the_ranking() -> None:
    asked = cand("q", "What are you researching?", label="user:Mel", content_hash="q")
    answer = cand(
        "a", "Adoption agencies!", label="user:Caroline", content_hash="a", neighbours=("q",)
    )
    other = cand("o", "I like research papers about bees", content_hash="o")
    stats = CorpusStats(500, {"research": 40, "carolin": 0})
    result = compose([other, asked, answer], query("What did Caroline research?", stats=stats))
    order = [s.candidate.id for s in result.ranked]
    assert order.index("a") < order.index("o")
