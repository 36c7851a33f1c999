"""The RPC guard on a real broker and nats-server: whatever a handler does (hang, raise a
driver error, answer with an error of its own making, take a body it cannot validate), the
caller gets one reply of the common error model; operations nobody serves are `not_found`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from pydantic import BaseModel

from tavern_events.replies import ErrorReply, timeout_headers
from tavern_runtime.bus import NatsConnection, build_broker
from tavern_runtime.settings import TavernSettings
from tavern_runtime.unknownops import UnknownOperations

SERVICE = "guardtest"


class Body(BaseModel):
    n: int


async def slow() -> dict[str, Any]:
    await asyncio.sleep(10)
    return {"late": True}


async def refused_by_postgres() -> dict[str, Any]:
    raise asyncpg.CheckViolationError("new row violates check constraint")


async def postgres_away() -> dict[str, Any]:
    raise ConnectionRefusedError("connection refused")


async def bug() -> dict[str, Any]:
    raise KeyError("secret-in-a-bug")


async def old_code() -> dict[str, Any]:
    return {"error": {"code": "bad_request", "message": "no such field"}}


async def typed(body: Body) -> dict[str, Any]:
    return {"n": body.n}


async def echo(body: Any) -> dict[str, Any]:
    return {"got": body}


HANDLERS = {
    "slow": slow,
    "refused": refused_by_postgres,
    "away": postgres_away,
    "bug": bug,
    "old": old_code,
    "typed": typed,
    "echo": echo,
}


@pytest.fixture
async def served(nats_url: str, conn: NatsConnection) -> AsyncIterator[NatsConnection]:
    settings = TavernSettings(nats_url=nats_url, rpc_deadline_s=0.5, rpc_max_request_bytes=4096)
    broker = build_broker(settings, SERVICE, on_lost=lambda: None)
    for name, handler in HANDLERS.items():
        broker.subscriber(f"tavern.rpc.{SERVICE}.{name}", queue=f"{SERVICE}-rpc")(handler)
    unknown = UnknownOperations(broker, SERVICE, settings)
    await broker.start()
    await unknown.start()
    try:
        yield conn
    finally:
        await unknown.stop()
        await broker.stop()


async def _ask(conn: NatsConnection, op: str, body: bytes = b"{}") -> dict[str, Any]:
    msg = await conn.nc.request(f"tavern.rpc.{SERVICE}.{op}", body, timeout=3)
    found: dict[str, Any] = json.loads(msg.data)
    return found


def _code(reply: dict[str, Any]) -> tuple[str, bool]:
    error = ErrorReply.model_validate(reply).error
    return error.code, error.retryable


async def test_a_handler_that_hangs_is_answered_timeout_at_the_deadline(
    served: NatsConnection,
) -> None:
    started = asyncio.get_running_loop().time()
    assert _code(await _ask(served, "slow")) == ("timeout", True)
    assert asyncio.get_running_loop().time() - started < 2


async def test_a_caller_that_waits_less_is_answered_timeout_before_its_wait_ends(
    served: NatsConnection,
) -> None:
    started = asyncio.get_running_loop().time()
    msg = await served.nc.request(
        f"tavern.rpc.{SERVICE}.slow", b"{}", timeout=0.3, headers=timeout_headers(0.3)
    )
    assert _code(json.loads(msg.data)) == ("timeout", True)
    assert asyncio.get_running_loop().time() - started < 0.3


async def test_driver_errors_are_answered_by_what_they_mean(served: NatsConnection) -> None:
    assert _code(await _ask(served, "refused")) == ("invalid", False)
    assert _code(await _ask(served, "away")) == ("unavailable", True)
    crashed = await _ask(served, "bug")
    assert _code(crashed) == ("internal", False)
    assert "secret-in-a-bug" not in json.dumps(crashed)


async def test_a_handlers_own_error_in_an_old_code_is_brought_into_the_model(
    served: NatsConnection,
) -> None:
    reply = await _ask(served, "old")
    assert _code(reply) == ("internal", False)
    assert reply["error"]["reason"] == "bad_request"


async def test_a_body_the_handler_cannot_validate_is_answered(served: NatsConnection) -> None:
    assert await _ask(served, "typed", b'{"n": 3}') == {"n": 3}
    refused = await _ask(served, "typed", b'{"n": "many"}')
    assert _code(refused) == ("invalid", False)
    assert "n" in refused["error"]["message"]


async def test_hostile_bodies_never_reach_the_handler(served: NatsConnection) -> None:
    assert _code(await _ask(served, "echo", b'{"q": "a\\u0000b"}')) == ("invalid", False)
    assert _code(await _ask(served, "echo", b'{"q": "\\ud800"}')) == ("invalid", False)
    assert _code(await _ask(served, "echo", b"[" * 100 + b"]" * 100)) == ("invalid", False)
    assert _code(await _ask(served, "echo", b'{"q": "' + b"x" * 5000 + b'"}')) == (
        "too_large",
        False,
    )
    assert await _ask(served, "echo", b'{"q": "fine \\ud83d\\ude42"}') == {"got": {"q": "fine 🙂"}}


async def test_an_unknown_operation_is_not_found_and_a_known_one_answered_once(
    served: NatsConnection,
) -> None:
    reply = await _ask(served, "no.such.thing")
    assert _code(reply) == ("not_found", False)
    assert reply["error"]["operations"] == sorted(HANDLERS)
    inbox = served.nc.new_inbox()
    sub = await served.nc.subscribe(inbox)
    await served.nc.publish(f"tavern.rpc.{SERVICE}.echo", b"{}", reply=inbox)
    assert json.loads((await sub.next_msg(timeout=3)).data) == {"got": {}}
    with pytest.raises(TimeoutError):
        await sub.next_msg(timeout=0.5)
