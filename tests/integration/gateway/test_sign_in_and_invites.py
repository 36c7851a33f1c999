"""Sign-in's rate limit and one-time invites under parallel requests, against real PostgreSQL."""

from __future__ import annotations

import asyncio

import httpx
from fastapi import FastAPI

from tests.integration.gateway.conftest import PASSWORD, Browser

WRONG = "not-the-password-at-all"


async def _invite(owner: Browser) -> str:
    found = await owner.post("/api/invites")
    assert found.status_code == 200, found.text
    return str(found.json()["url"]).rsplit("/", 1)[1]


async def test_sixty_parallel_sign_ins_evaluate_at_most_the_limit_and_the_late_right_one_fails(
    gateway: FastAPI, owner: Browser
) -> None:
    limit = gateway.state.gateway.settings.gateway_login_failures
    attacker = await Browser(gateway, "203.0.113.7").open()
    guesses = [WRONG] * 60
    guesses[54] = PASSWORD  # the right one, late in the burst
    tries = [attacker.post("/api/login", {"name": "olga", "password": g}) for g in guesses[:54]]
    answers = list(await asyncio.gather(*tries))
    answers.append(await attacker.post("/api/login", {"name": "olga", "password": guesses[54]}))
    answers += await asyncio.gather(
        *(attacker.post("/api/login", {"name": "olga", "password": g}) for g in guesses[55:])
    )
    statuses = [a.status_code for a in answers]
    assert statuses.count(401) <= limit, statuses
    assert statuses.count(401) + statuses.count(429) == 60, statuses
    assert answers[54].status_code == 429, answers[54].text
    assert int(answers[54].headers["Retry-After"]) <= 300
    assert answers[54].json()["error"]["code"] == "rate_limited"
    assert "tavern_session" not in attacker.http.cookies


async def test_a_locked_out_address_does_not_lock_out_the_owner_elsewhere(
    gateway: FastAPI, owner: Browser
) -> None:
    attacker = await Browser(gateway, "203.0.113.8").open()
    for _ in range(8):
        await attacker.post("/api/login", {"name": "olga", "password": WRONG})
    locked = await attacker.post("/api/login", {"name": "olga", "password": PASSWORD})
    assert locked.status_code == 429, locked.text
    elsewhere = await Browser(gateway, "198.51.100.20").open()
    signed_in = await elsewhere.post("/api/login", {"name": "olga", "password": PASSWORD})
    assert signed_in.status_code == 200, signed_in.text
    assert elsewhere.http.cookies.get("tavern_session")


async def test_eight_parallel_accepts_of_one_invite_make_exactly_one_account(
    gateway: FastAPI, owner: Browser
) -> None:
    token = await _invite(owner)
    guests = [await Browser(gateway).open() for _ in range(8)]
    answers: list[httpx.Response] = await asyncio.gather(
        *(
            g.post(f"/api/invites/{token}/accept", {"name": f"guest{i}", "password": PASSWORD})
            for i, g in enumerate(guests)
        )
    )
    assert sorted(a.status_code for a in answers) == [200] + [404] * 7, [a.text for a in answers]
    pool = gateway.state.gateway.store.pool
    names = await pool.fetch("SELECT name FROM gateway.accounts WHERE role = 'user'")
    assert len(names) == 1


async def test_a_taken_name_leaves_the_invite_usable(gateway: FastAPI, owner: Browser) -> None:
    token = await _invite(owner)
    guest = await Browser(gateway).open()
    taken = await guest.post(f"/api/invites/{token}/accept", {"name": "olga", "password": PASSWORD})
    assert taken.status_code == 400, taken.text
    joined = await guest.post(f"/api/invites/{token}/accept", {"name": "uma", "password": PASSWORD})
    assert joined.status_code == 200, joined.text


async def test_an_invitee_never_becomes_the_bus_user_of_their_chosen_name(
    gateway: FastAPI, owner: Browser
) -> None:
    token = await _invite(owner)
    guest = await Browser(gateway).open()
    joined = await guest.post(f"/api/invites/{token}/accept", {"name": "bob", "password": PASSWORD})
    assert joined.status_code == 200, joined.text
    me = (await guest.http.get("/api/me")).json()
    assert me["name"] == "bob"
    assert me["principal"].startswith("user:w-")
    assert me["principal"] != "user:bob"


async def test_the_sign_in_page_sends_a_foreign_next_home(gateway: FastAPI, owner: Browser) -> None:
    page = await owner.http.get("/login", params={"next": "/\\evil.example/x"})
    assert page.status_code == 200
    assert 'data-next="/"' in page.text
    assert "evil.example" not in page.text
    kept = await owner.http.get("/login", params={"next": "/chat/s-1"})
    assert 'data-next="/chat/s-1"' in kept.text


async def test_ended_windows_are_dropped_so_tried_names_do_not_pile_up(
    gateway: FastAPI, owner: Browser
) -> None:
    pool = gateway.state.gateway.store.pool
    guesser = await Browser(gateway, "203.0.113.9").open()
    for name in ("ann", "ben", "cy"):
        await guesser.post("/api/login", {"name": name, "password": WRONG})
    await pool.execute("UPDATE gateway.login_attempts SET window_start = now() - interval '1 h'")
    await guesser.post("/api/login", {"name": "dee", "password": WRONG})
    kept = await pool.fetch("SELECT account FROM gateway.login_attempts")
    assert [r["account"] for r in kept] == ["dee"]
