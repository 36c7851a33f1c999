"""The consolidator's RPCs serve the operator and the services: a user asking directly, or a
request without a genuine principal, is refused in the common error model."""

from __future__ import annotations

import json

import pytest

from tavern_events import subjects
from tests.integration.consolidator.conftest import Tavern
from tests.support import as_user, auth

pytestmark = pytest.mark.integration


async def _ask(tavern: Tavern, op: str, headers: dict[str, str] | None) -> dict[str, object]:
    body = json.dumps({"scope_id": "s1"}).encode()
    msg = await tavern.nc.request(subjects.rpc("consolidator", op), body, 15, headers=headers)
    found: dict[str, object] = json.loads(msg.data)
    return found


@pytest.mark.parametrize("op", ["status", "rules.list", "expression.list", "audit"])
async def test_a_user_and_an_unsigned_request_are_refused_and_the_operator_served(
    tavern: Tavern, op: str
) -> None:
    await tavern.session("s1")
    user = await _ask(tavern, op, as_user("bob"))
    assert user["error"]["code"] == "forbidden"  # type: ignore[index]
    forged = {"Tavern-Principal": "v1.e30.AAAA"}
    assert (await _ask(tavern, op, forged))["error"]["code"] == "unauthenticated"  # type: ignore[index]
    assert "error" not in await _ask(tavern, op, auth())
