"""Session events -> evidence drafts -> a batch plan: what becomes evidence, and how."""
# ruff: noqa: RUF001 - full-width characters are test data (Chinese text, NFKC)

from __future__ import annotations

import pytest

from tavern_ledger.domain.admission import Admitted, Refused, admit_draft
from tavern_ledger.domain.contradiction import is_correction
from tavern_ledger.domain.extract import (
    ExtractConfig,
    SessionFacts,
    Skip,
    clamp,
    extract,
    session_facts_of,
    user_label,
)
from tavern_ledger.domain.gates import GateConfig
from tavern_ledger.domain.ids import content_hash, evidence_id
from tavern_ledger.domain.ingestion import Incoming, plan_batch
from tavern_ledger.domain.noise import machine_template
from tests.unit.ledger.builders import (
    assistant_message,
    session_created,
    tool_result,
    user_message,
)

ROOT = SessionFacts("s1", "chat1")


def test_user_input_becomes_user_fact_evidence() -> None:
    draft = extract(user_message("s1", 2, "I drink oolong"), ROOT)
    assert not isinstance(draft, Skip)
    assert (draft.source_class, draft.authority, draft.claim_domain) == (
        "user_input",
        "user_explicit",
        "user_fact",
    )
    assert (draft.confidence, draft.durability, draft.label) == (0.9, 0.5, "user")


@pytest.mark.parametrize(
    ("text", "correction"),
    [
        ("不对，改成四个空格", True),
        ("Actually I meant Tuesday", True),
        ("use tabs instead", True),
        ("记住：周五不部署", False),
        ("你是一个资深的后端工程师，任务是把这个服务拆成三个模块不要偷懒", False),
        ("I like it", False),
    ],
)
def test_corrections_are_classified(text: str, correction: bool) -> None:
    assert is_correction(text) is correction


def test_a_directive_correction_claims_a_preference() -> None:
    draft = extract(user_message("s1", 2, "不对，应该用四个空格缩进"), ROOT)
    assert not isinstance(draft, Skip)
    assert (draft.source_class, draft.claim_domain, draft.confidence) == (
        "user_correction",
        "user_preference",
        1.0,
    )


def test_a_correction_of_a_fact_claims_a_fact() -> None:
    draft = extract(user_message("s1", 2, "Correction: Kevin now coaches in Leeds"), ROOT)
    assert not isinstance(draft, Skip)
    assert (draft.source_class, draft.claim_domain) == ("user_correction", "user_fact")


@pytest.mark.parametrize(
    ("event", "reason"),
    [
        (assistant_message("s1", 3, "I will remember"), "type:assistant/message"),
        (user_message("s1", 3, "[recall] x", source="plugin:ledger", form="recall"), "injected"),
        (user_message("s1", 3, "stop repeating", source="plugin:repeat-tool-reminder"), "injected"),
        (user_message("s1", 3, "hi", form="reminder"), "injected"),
        (user_message("s1", 3, "<system-reminder>be nice</system-reminder>"), "system-reminder"),
        (user_message("s1", 3, "   "), "empty"),
        (tool_result("s1", 3, "ok"), "machine-template"),
        (tool_result("s1", 3, "written 120 bytes"), "machine-template"),
        (tool_result("s1", 3, "cancelled", ok=False), "tool"),
        (tool_result("s1", 3, "x", synthetic=True), "tool"),
        (tool_result("s1", 3, "a memory", name="memory_search"), "tool"),
    ],
)
def test_what_is_never_evidence(event: object, reason: str) -> None:
    skipped = extract(event, ROOT)  # type: ignore[arg-type]
    assert isinstance(skipped, Skip)
    assert skipped.reason.startswith(reason)


def test_tool_output_is_external_information() -> None:
    draft = extract(tool_result("s1", 3, "HTTP 200: 42 results", name="web_search"), ROOT)
    assert not isinstance(draft, Skip)
    assert (draft.source_class, draft.authority, draft.claim_domain, draft.label) == (
        "external_tool",
        "external_information",
        "external_fact",
        "tool:web_search",
    )


def test_subagent_user_messages_are_downgraded_unless_configured_off() -> None:
    sub = session_facts_of(session_created("sub", source="agent:main"))
    assert sub.session_type == "subagent"
    draft = extract(user_message("sub", 2, "list the files"), sub)
    assert not isinstance(draft, Skip)
    assert (draft.source_class, draft.authority, draft.claim_domain) == (
        "agent_authored",
        "agent_inference",
        "experience",
    )
    kept = extract(
        user_message("sub", 2, "list the files"), sub, ExtractConfig(subagent_downgrade=False)
    )
    assert not isinstance(kept, Skip)
    assert kept.source_class == "user_input"


def test_agent_sourced_user_messages_are_downgraded_and_unknown_sources_fail_closed() -> None:
    agent = extract(user_message("s1", 2, "do the thing", source="agent:planner"), ROOT)
    assert not isinstance(agent, Skip)
    assert agent.authority == "agent_inference"
    host = extract(user_message("s1", 2, "synthetic note", source="host"), ROOT)
    assert not isinstance(host, Skip)
    assert host.ingest == "session-event-unknown-source"
    outcome = admit_draft(host, "chat1", GateConfig())
    assert isinstance(outcome, Admitted)
    assert outcome.row.state == "quarantined"
    assert outcome.reasons == ("ingest:untrusted:session-event-unknown-source",)


def test_fork_sessions_are_typed() -> None:
    assert session_facts_of(session_created("f1", parent="s1")).session_type == "fork"
    assert session_facts_of(session_created("r1")).session_type == "root"


def test_long_text_is_clamped_with_a_visible_marker() -> None:
    text = clamp("x" * 5000)
    assert text.endswith("…[truncated 5000 chars]")
    assert len(text) < 4100
    assert clamp("a\x00b ") == "ab"


def test_evidence_ids_derive_from_session_position_and_content() -> None:
    event = user_message("s1", 7, "I drink oolong")
    outcome = admit_draft(extract(event, ROOT), "chat1", GateConfig())  # type: ignore[arg-type]
    assert isinstance(outcome, Admitted)
    expected = evidence_id({"sessionEventId": "s1:7"}, content_hash("I drink oolong"))
    assert outcome.row.id == expected
    assert outcome.row.source_ref == '{"sessionEventId":"s1:7"}'
    assert outcome.row.scope_id == "chat1"


def test_a_blocked_draft_is_refused_with_an_audit_that_keeps_no_text() -> None:
    event = user_message("s1", 2, "token ghp_abcdefghijklmnopqrstuvwxyz0123456789")
    outcome = admit_draft(extract(event, ROOT), "chat1", GateConfig())  # type: ignore[arg-type]
    assert isinstance(outcome, Refused)
    assert outcome.reasons == ("secret:github_token",)
    assert outcome.audit.dedupe_key == f"ingest:{event.id}"
    assert "ghp_" not in str(outcome.audit.payload)
    assert "ghp_" not in outcome.audit.reason


def test_plan_batch_learns_sessions_in_order_and_plans_duplicates_once() -> None:
    created = session_created("sub", chat_id="chat9", source="agent:main")
    message = user_message("sub", 2, "read the docs")
    incoming = [
        Incoming(1, created),
        Incoming(2, message),
        Incoming(3, message),
        Incoming(4, assistant_message("sub", 3)),
        Incoming(5, user_message("sub", 4, "key AKIAIOSFODNN7EXAMPLE")),
    ]
    plan = plan_batch(incoming, {}, GateConfig())
    assert plan.last_stream_seq == 5
    assert plan.sessions["sub"].chat_id == "chat9"
    [admitted] = plan.admitted
    assert (admitted.row.scope_id, admitted.row.session_type) == ("chat9", "subagent")
    assert len(plan.refused) == 1
    assert plan.skipped == {"duplicate": 1, "type": 1}


def test_plan_is_the_same_when_replayed() -> None:
    incoming = [Incoming(1, user_message("s1", 2, "replay me"))]
    first = plan_batch(incoming, {"s1": ROOT}, GateConfig())
    again = plan_batch(incoming, {"s1": ROOT}, GateConfig())
    assert [a.row for a in first.admitted] == [a.row for a in again.admitted]


def test_machine_templates() -> None:
    assert machine_template("  Done.") == "tool-receipt-bare"
    assert machine_template("[out.txt written] size=12") == "tool-receipt-written-bracketed"
    assert machine_template("rows: 12") == "tool-receipt-counts"
    assert machine_template("【maid 压缩归档】 ...") == "maid-archive"
    assert machine_template("all done, 3 files changed") is None


def test_text_that_utf8_cannot_carry_is_made_storable() -> None:
    assert clamp("a\ud800b?") == "a\ufffdb?"
    draft = extract(user_message("s1", 2, "bad \udfff half"), ROOT)
    assert not isinstance(draft, Skip)
    outcome = admit_draft(draft, "chat1", GateConfig())
    assert isinstance(outcome, Admitted)
    assert outcome.row.content.encode("utf-8") == "bad \ufffd half".encode()


def test_a_named_speaker_is_kept_in_the_label() -> None:
    message = user_message("s1", 2, "I went hiking").model_copy(update={"actor_id": "Caroline"})
    draft = extract(message, ROOT)
    assert not isinstance(draft, Skip)
    assert draft.label == "user:Caroline"
    assert user_label(None) == "user"
