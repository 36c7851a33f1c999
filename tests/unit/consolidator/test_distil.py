"""Distillation output: strict schema, truncation and invalid output are failures, the rule
fallback, and when a batch falls back rather than fails."""

from __future__ import annotations

import json

from tavern_consolidator.domain.distil import (
    Attempt,
    Distilled,
    Rejected,
    build_messages,
    fallback,
    parse,
    settle,
)
from tests.unit.consolidator.builders import evidence

IDS = frozenset({"ev_1", "ev_2"})


def obs(**overrides: object) -> dict[str, object]:
    return {
        "subject": "tea",
        "predicate": "prefers",
        "claimDomain": "user_preference",
        "text": "prefers green tea",
        "evidenceIds": ["ev_1"],
        **overrides,
    }


def output(*items: dict[str, object]) -> str:
    return json.dumps({"observations": list(items)})


def test_valid_output_becomes_observations() -> None:
    found = parse(output(obs(), obs(subject="code", evidenceIds=["ev_1", "ev_2"])), "stop", IDS)
    assert isinstance(found, Distilled)
    assert [o.subject for o in found.observations] == ["tea", "code"]
    assert found.observations[1].evidence_ids == ("ev_1", "ev_2")


def test_a_fenced_reply_and_prose_around_the_object_are_accepted() -> None:
    fenced = "```json\n" + output(obs()) + "\n```"
    chatty = "Here you go: " + output(obs()) + " Hope this helps."
    assert isinstance(parse(fenced, "stop", IDS), Distilled)
    assert isinstance(parse(chatty, "stop", IDS), Distilled)


def test_an_empty_list_is_a_valid_empty_success() -> None:
    assert parse('{"observations": []}', "stop", IDS) == Distilled(())


def test_output_cut_at_the_token_limit_is_a_failure_even_if_it_parses() -> None:
    assert parse(output(obs()), "length", IDS) == Rejected(
        "truncated", "the model stopped at its output limit"
    )


def test_unparseable_output_is_a_failure() -> None:
    found = parse('{"observations": [{"subject": "tea", "predi', "stop", IDS)
    assert isinstance(found, Rejected)
    assert found.reason == "parse_failed"


def test_one_invalid_entry_fails_the_whole_reply() -> None:
    cases = [
        output(obs(), obs(claimDomain="opinions")),
        output(obs(), obs(mood="happy")),
        output(obs(text="   ")),
        output(obs(evidenceIds="ev_1")),
        json.dumps({"observations": [obs()], "notes": "extra"}),
        output(*[obs()] * 9),
    ]
    for text in cases:
        found = parse(text, "stop", IDS)
        assert isinstance(found, Rejected), text
        assert found.reason == "schema_invalid", text


def test_evidence_that_is_not_in_the_batch_is_rejected() -> None:
    found = parse(output(obs(evidenceIds=["ev_invented"])), "stop", IDS)
    assert isinstance(found, Rejected)
    assert "unknown evidence ev_invented" in found.detail


def test_an_observation_without_backlinks_is_kept_with_a_warning() -> None:
    found = parse(output(obs(evidenceIds=[])), "stop", IDS)
    assert isinstance(found, Distilled)
    assert found.warnings == ("observation_without_backlink:0",)


def test_long_subjects_and_texts_are_clipped() -> None:
    found = parse(output(obs(subject="s" * 60, text="t" * 600)), "stop", IDS)
    assert isinstance(found, Distilled)
    [o] = found.observations
    assert (len(o.subject), len(o.text)) == (40, 500)


def test_fallback_is_one_observation_per_evidence_keyed_by_its_first_40_characters() -> None:
    rows = [evidence(1, "x" * 50, domain="user_fact"), evidence(2, "short", domain="work")]
    found = fallback(rows)
    assert [(o.subject, o.predicate, o.claim_domain, o.evidence_ids) for o in found] == [
        ("x" * 40, "states", "user_fact", (rows[0].id,)),
        ("short", "states", "work", (rows[1].id,)),
    ]


def test_the_prompt_cuts_long_evidence_and_lists_ids_and_domains() -> None:
    [system, user] = build_messages([evidence(1, "y" * 450)])
    records = json.loads(user["content"].partition("\n")[2])
    assert "AT MOST 3 observations" in system["content"]
    assert records[0]["content"] == "y" * 400 + "…[truncated 450 chars]"
    assert records[0]["claimDomain"] == "user_fact"


def test_only_an_unreachable_model_falls_back() -> None:
    gone = Attempt("unreachable", "cannot connect")
    assert settle([gone, gone]) == "fallback"
    assert settle([gone, Attempt("rejected", "truncated")]) == "failed"
    assert settle([Attempt("failed", "500"), Attempt("failed", "500")]) == "failed"
    assert settle([Attempt("rejected", "x"), Attempt("ok", distilled=Distilled(()))]) == "model"
    assert settle([]) == "failed"
