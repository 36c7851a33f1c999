"""The authority x domain matrix, source-class consistency and the read gate."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tavern_ledger.domain.eligibility import Readable, ReadContext, eligible, read_gate
from tavern_ledger.domain.vocabulary import (
    AUTHORITIES,
    CLAIM_DOMAINS,
    authority_for,
    consistency_error,
    metadata_error,
    weakest,
)

T = datetime(2026, 5, 1, tzinfo=UTC)

EXPECTED_FALSE = {
    ("single_observation", "user_preference"),
    ("single_observation", "style"),
    ("external_information", "user_preference"),
    ("external_information", "style"),
    *(("agent_inference", d) for d in CLAIM_DOMAINS),
    *(("agent_self_evaluation", d) for d in CLAIM_DOMAINS),
}


@pytest.mark.parametrize("authority", AUTHORITIES)
@pytest.mark.parametrize("domain", CLAIM_DOMAINS)
def test_matrix(authority: str, domain: str) -> None:
    assert eligible(authority, domain) is ((authority, domain) not in EXPECTED_FALSE)


def test_unknown_authority_is_not_judged() -> None:
    assert eligible(None, "style")
    assert eligible("legacy", "style")


def test_source_class_authority_consistency() -> None:
    assert authority_for("user_input") == "user_explicit"
    assert authority_for("external_tool") == "external_information"
    assert authority_for("agent_authored", "self_eval") == "agent_self_evaluation"
    assert authority_for("agent_authored") == "single_observation"
    assert consistency_error("external_tool", "user_explicit") is not None
    assert consistency_error("user_correction", "user_explicit") is not None
    assert consistency_error("user_input", "agent_inference") is not None
    assert consistency_error("agent_authored", "user_explicit") is None
    assert consistency_error("system", "system_policy") is None
    assert consistency_error("robot", "system_policy") is not None


def test_metadata_whitelist() -> None:
    assert metadata_error({"ttlDays": 3, "reviewStatus": "x"}) is None
    assert "not allowed" in (metadata_error({"secret": 1}) or "")


def test_weakest_authority_by_trust_rank() -> None:
    assert weakest(["user_correction", "external_information"]) == "external_information"
    assert weakest(["user_explicit", "system_policy"]) == "system_policy"
    assert weakest(["unknown"]) is None


def row(**kw: object) -> Readable:
    base: dict[str, object] = {
        "state": "active",
        "scope_id": "c1",
        "authority": "user_explicit",
        "claim_domain": "user_fact",
    }
    return Readable(**{**base, **kw})  # type: ignore[arg-type]


def test_read_gate_order() -> None:
    ctx = ReadContext(scope_id="c1")
    assert read_gate(row(), ctx) == ()
    assert read_gate(row(state="quarantined"), ReadContext(allow_superseded=True)) == (
        "state not injectable",
    )
    assert read_gate(row(state="redacted"), ctx) == ("state not injectable",)
    assert read_gate(row(state="superseded"), ctx) == ("superseded by newer evidence",)
    assert read_gate(row(scope_id="c2"), ctx) == ("scope mismatch",)
    assert read_gate(row(authority="agent_inference", claim_domain="experience"), ctx) == (
        "authority not permitted for target domain: experience",
    )


def test_read_gate_validity_window_is_half_open() -> None:
    window = row(state="superseded", valid_from=T, valid_until=T + timedelta(days=1))
    past = ReadContext(valid_at=T + timedelta(hours=1), allow_superseded=True)
    assert read_gate(window, past) == ()
    assert read_gate(window, ReadContext(valid_at=T - timedelta(1), allow_superseded=True)) == (
        "not yet valid",
    )
    at_end = ReadContext(valid_at=T + timedelta(days=1), allow_superseded=True)
    assert read_gate(window, at_end) == ("expired",)
