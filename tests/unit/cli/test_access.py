"""The NATS access model against the code: every RPC a service's code asks is granted to that
service, and the loop and the client get nothing more dangerous than they need."""

from __future__ import annotations

import re
from pathlib import Path

from tavern_cli import access

REPO = Path(__file__).resolve().parents[3]
LOOP = REPO / "services" / "loop" / "tavern_loop"
CONSOLIDATOR = REPO / "services" / "consolidator" / "tavern_consolidator"


def _loop_calls() -> set[str]:
    ledger_tools = (LOOP / "tools" / "ledger_tools.py").read_text()
    tavern_tools = (LOOP / "tools" / "tavern_tools.py").read_text()
    assets = (LOOP / "profiles" / "assets.py").read_text()
    found = {f"ledger.{op}" for op in re.findall(r'"((?:memory|variable)\.[a-z_]+)"', ledger_tools)}
    found |= {
        f"{service}.{op}"
        for service, op in re.findall(r'_adapter\(spec, "([a-z]+)", "([a-z_.]+)"', tavern_tools)
    }
    found |= {f"projector.{op}" for op in re.findall(r'self\._call\("([a-z_.]+)"', assets)}
    found |= {"ledger.recall", "consolidator.approvals.next"}  # recall.py, turn.py
    return found


def test_the_loop_may_ask_every_rpc_its_code_calls_and_no_other() -> None:
    calls = _loop_calls()
    assert len(calls) >= 15
    assert calls == set(access.LOOP_RPCS)


def test_the_consolidator_may_ask_what_its_ledger_client_calls() -> None:
    client = (CONSOLIDATOR / "ledger_client.py").read_text()
    assert '"observation.propose"' in client
    assert '"observation.propose_batch"' in client
    assert 'f"consolidation.{op}"' in client
    assert '"stats"' in client  # the ownership check of a user's review request
    assert '"claim.supersede"' in client
    assert set(access.CONSOLIDATOR_RPCS) == {
        "ledger.observation.propose",
        "ledger.observation.propose_batch",
        "ledger.claim.supersede",
        "ledger.consolidation.>",
        "ledger.stats",
    }


def test_no_ledger_administration_for_the_loop_or_the_client() -> None:
    administration = ("delete", "export", "import", "rollback", "redact", "correct", "audit")
    for name in (*access.LOOP_RPCS, *access.CLIENT_RPCS):
        assert name.split(".", 1)[1] not in administration, name
    assert not any(name.startswith("ledger.") for name in access.CLIENT_RPCS)


def test_every_user_subscribes_to_its_own_inbox_only() -> None:
    for rules in access.permissions():
        inboxes = [s for s in rules.subscribe if s.startswith("_INBOX")]
        if rules.user == "operator":
            assert rules.subscribe == (">",)
            continue
        assert inboxes == [f"_INBOX_{rules.user}.>"], rules.user


def test_pull_and_ack_are_granted_per_durable_name() -> None:
    for rules in access.permissions():
        for subject in rules.publish:
            if subject.startswith("$JS.ACK."):
                assert subject.count(".") == 4, subject  # $JS.ACK.<stream>.<durable>.>
                assert "*" not in subject, subject
            if subject.startswith("$JS.API.CONSUMER.MSG.NEXT.") and subject.endswith(".*"):
                assert rules.user == "projector", subject  # unnamed read consumers
                assert rules.deny_publish
