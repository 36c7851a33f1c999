"""Pure rules of the session-log writer: numbering, retry detection, headers, head cache."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tavern_events.ids import new_id
from tavern_events.step import StepStarted
from tavern_runtime.errors import PermanentError
from tavern_runtime.sessionlog import (
    Head,
    HeadCache,
    append_headers,
    assign_seqs,
    batch_headers,
    lands_as_tail,
    log_seq_of,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def step(session_id: str = "s1", seq: int = 0) -> StepStarted:
    return StepStarted(id=new_id(), session_id=session_id, seq=seq, ts=NOW, turn=1, step=1)


def test_assign_seqs_numbers_gaplessly_after_the_head() -> None:
    numbered = assign_seqs("s1", [step(), step(), step()], after=7)
    assert [e.seq for e in numbered] == [8, 9, 10]


def test_assign_seqs_keeps_ids_and_leaves_inputs_untouched() -> None:
    events = [step(), step()]
    numbered = assign_seqs("s1", events, after=0)
    assert [e.id for e in numbered] == [e.id for e in events]
    assert [e.seq for e in events] == [0, 0]


def test_assign_seqs_accepts_events_already_numbered_the_same_way() -> None:
    numbered = assign_seqs("s1", [step(seq=3), step(seq=4)], after=2)
    assert [e.seq for e in numbered] == [3, 4]


def test_assign_seqs_refuses_a_conflicting_number() -> None:
    with pytest.raises(PermanentError, match="already numbered"):
        assign_seqs("s1", [step(seq=5)], after=2)


def test_assign_seqs_refuses_an_event_of_another_session() -> None:
    with pytest.raises(PermanentError, match="another session"):
        assign_seqs("s1", [step(), step("s2")], after=0)


def test_assign_seqs_refuses_nothing_to_append() -> None:
    with pytest.raises(PermanentError):
        assign_seqs("s1", [], after=0)


def test_lands_as_tail_recognises_own_events_at_the_end() -> None:
    numbered = assign_seqs("s1", [step(), step()], after=4)
    head = Head(log_seq=6, stream_seq=99, event_id=numbered[-1].id)
    assert lands_as_tail(head, numbered)


def test_lands_as_tail_rejects_a_foreign_tail_or_other_position() -> None:
    numbered = assign_seqs("s1", [step()], after=4)
    assert not lands_as_tail(Head(5, 99, "someone-else"), numbered)
    assert not lands_as_tail(Head(6, 99, numbered[-1].id), numbered)
    assert not lands_as_tail(Head(), numbered)


def test_append_headers_guard_the_whole_session() -> None:
    event = step()
    headers = append_headers("s1", event, 41)
    assert headers == {
        "Nats-Msg-Id": event.id,
        "Nats-Expected-Last-Subject-Sequence": "41",
        "Nats-Expected-Last-Subject-Sequence-Subject": "tavern.session.s1.>",
    }


def test_batch_headers_commit_only_on_the_last_message() -> None:
    assert "Nats-Batch-Commit" not in batch_headers("b", 1, 3)
    assert "Nats-Batch-Commit" not in batch_headers("b", 2, 3)
    assert batch_headers("b", 3, 3) == {
        "Nats-Batch-Id": "b",
        "Nats-Batch-Sequence": "3",
        "Nats-Batch-Commit": "1",
    }


def test_log_seq_of_reads_the_envelope_without_validation() -> None:
    assert log_seq_of(b'{"type": "future/thing", "seq": 12}') == 12


@pytest.mark.parametrize("data", [b"not json", b"[]", b'{"seq": 0}', b'{"seq": "3"}', None])
def test_log_seq_of_refuses_a_tail_without_a_position(data: bytes | None) -> None:
    with pytest.raises(PermanentError):
        log_seq_of(data)


def test_head_cache_evicts_the_least_recently_used_session() -> None:
    cache = HeadCache(size=2)
    cache.put("a", Head(1, 1))
    cache.put("b", Head(1, 2))
    assert cache.get("a") == Head(1, 1)
    cache.put("c", Head(1, 3))
    assert cache.get("b") is None
    assert cache.get("a") is not None
    assert cache.get("c") is not None
