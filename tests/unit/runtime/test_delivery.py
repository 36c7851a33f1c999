"""Reading a delivery's stream sequence and pending count off its reply subject."""

from __future__ import annotations

import pytest
from nats.aio.msg import Msg
from nats.errors import NotJSMessageError

from tavern_runtime.delivery import delivery, pending, stream_sequence


def _msg(reply: str) -> Msg:
    return Msg(_client=None, subject="tavern.session.s1.user.message", reply=reply)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "reply",
    [
        "$JS.ACK.SESSIONS.ledger-ingest.3.1042.77.1764500000000000000.12",
        "$JS.ACK._.ACCHASH.SESSIONS.ledger-ingest.3.1042.77.1764500000000000000.12.r4nd0m",
        "$JS.ACK.hub.ACCHASH.SESSIONS.ledger-ingest.3.1042.77.1764500000000000000.12",
    ],
    ids=["v1", "v2", "v2-without-token"],
)
def test_the_reply_subject_gives_what_nats_py_metadata_gives(reply: str) -> None:
    msg = _msg(reply)
    assert stream_sequence(msg) == 1042 == msg.metadata.sequence.stream
    assert pending(msg) == 12 == msg.metadata.num_pending
    stored_ns = delivery(msg).stored_ns
    assert stored_ns == 1764500000000000000
    assert stored_ns == round(msg.metadata.timestamp.timestamp() * 1e9, -3)


@pytest.mark.parametrize("reply", ["", "_INBOX.abc.1", "$JS.ACK.SESSIONS.too.short"])
def test_a_message_that_is_no_jetstream_delivery_is_refused_as_nats_py_refuses_it(
    reply: str,
) -> None:
    with pytest.raises(NotJSMessageError):
        stream_sequence(_msg(reply))
    with pytest.raises(NotJSMessageError):
        pending(_msg(reply))
