"""The chat page when the network is not kind, in a real Chromium against the whole stack as
processes: a refused event stream is followed again, and what is typed while a message is being
sent is neither lost nor sent twice."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.web.conftest import create_owner, sign_in
from tests.reliability.stack import Stack

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(600)]

CARDS = Path(__file__).resolve().parents[2] / "fixtures" / "cards"
REPLY_MS = 30_000
OWNER, PASSWORD = "nell", "harbour-light-7777"


@pytest.fixture
async def page(stack: Stack, browser: Any) -> AsyncIterator[Any]:
    """A signed-in owner (made on the first use) with Mira imported, on the gallery."""
    context = await browser.new_context()
    page = await context.new_page()
    await page.goto(stack.gateway_url)
    if await page.get_by_role("heading", name="Welcome to AgentTavern").count():
        await create_owner(page, stack.gateway_url, OWNER, PASSWORD)
    else:
        await sign_in(page, stack.gateway_url, OWNER, PASSWORD)
    await page.get_by_label("Card, lorebook or persona file").set_input_files(
        str(CARDS / "v2_mira.png")
    )
    await page.get_by_text(re.compile(r"mported character Mira\.")).wait_for()
    try:
        yield page
    finally:
        await context.close()


async def test_a_refused_event_stream_is_followed_again(page: Any) -> None:
    """The browser gives up on an event stream answered with an error (a sign-in that expired,
    a chat still being made); the page opens it again and the reply still shows."""
    asked = 0

    async def refuse_first(route: Any) -> None:
        nonlocal asked
        asked += 1
        if asked == 1:
            error = {"code": "unauthenticated", "message": "sign in", "retryable": False}
            await route.fulfill(status=401, json={"error": error})
        else:
            await route.continue_()

    await page.route(re.compile(r"/api/sessions/[^/]+/events"), refuse_first)
    await page.get_by_role("button", name="Chat with Mira").click()
    await page.wait_for_url(re.compile(r"/chat/s-"))
    await (
        page.get_by_role("status")
        .or_(page.locator("#notice"))
        .get_by_text(re.compile("Live updates of this chat stopped"))
        .wait_for()
    )
    await page.get_by_text("The door creaks open.").wait_for(timeout=REPLY_MS)
    assert asked >= 2
    box = page.get_by_label("Message")
    await box.fill("Are you still there?")
    await box.press("Enter")
    reply = page.locator(".msg.assistant[data-streaming='false']", has_text="Are you still there?")
    await reply.first.wait_for(timeout=REPLY_MS)
    assert await page.locator("#notice").is_hidden(), "the notice goes once the stream holds"


async def test_what_is_typed_while_a_message_is_sent_stays_and_is_not_sent_twice(
    page: Any,
) -> None:
    held = asyncio.Event()
    posted: list[str] = []

    async def slow_send(route: Any) -> None:
        posted.append(route.request.post_data or "")
        if len(posted) == 1:
            await held.wait()
        await route.continue_()

    await page.get_by_role("button", name="Chat with Mira").click()
    await page.wait_for_url(re.compile(r"/chat/s-"))
    await page.get_by_text("The door creaks open.").wait_for(timeout=REPLY_MS)
    await page.route(re.compile(r"/api/sessions/[^/]+/messages"), slow_send)
    box = page.get_by_label("Message")
    await box.fill("The first thing.")
    await box.press("Enter")
    await page.wait_for_function("() => document.querySelector('#send').disabled")
    await box.press("Enter")  # a second Enter while the first is on its way: no second send
    await box.fill("The next thing, half typed")
    held.set()
    await page.wait_for_function("() => !document.querySelector('#send').disabled")
    assert await box.input_value() == "The next thing, half typed"
    reply = page.locator(".msg.assistant[data-streaming='false']", has_text="The first thing.")
    await reply.first.wait_for(timeout=REPLY_MS)
    assert len(posted) == 1, posted
    await page.reload()
    assert await page.get_by_label("Message").input_value() == "The next thing, half typed"


async def test_a_variable_is_saved_twice_and_edited_from_the_form(stack: Stack, page: Any) -> None:
    await page.get_by_role("button", name="Chat with Mira").click()
    await page.wait_for_url(re.compile(r"/chat/s-"))
    await page.get_by_text("The door creaks open.").wait_for(timeout=REPLY_MS)
    session_id = page.url.rsplit("/", 1)[1]
    await page.goto(f"{stack.gateway_url.rstrip('/')}/manage?session={session_id}")
    await page.get_by_label("Variable name").fill("mood")
    for value in ('"calm"', '"stormy"'):
        await page.get_by_label("Value (JSON)").fill(value)
        await page.get_by_role("button", name="Save variable").click()
        await page.locator("#variables td", has_text=value).wait_for()
    assert await page.locator("#notice").is_hidden(), await page.locator("#notice").text_content()
    assert await page.get_by_label("Expected revision (0 for a new variable)").input_value() == "2"
    # Edit fills the form with the value as it is (not its JSON text quoted again).
    await page.get_by_role("button", name="Edit mood").click()
    assert await page.get_by_label("Value (JSON)").input_value() == '"stormy"'
    await page.get_by_label("Value (JSON)").fill('{"sky": "clear"}')
    await page.get_by_role("button", name="Save variable").click()
    await page.locator("#variables td", has_text="{sky}").wait_for()  # an object's summary
    # A summary is not the value: Edit leaves the value to write, and says so.
    await page.get_by_role("button", name="Edit mood").click()
    assert await page.get_by_label("Value (JSON)").input_value() == ""
    await page.locator("#notice", has_text="The list shows a summary of mood's value").wait_for()


async def test_the_manage_page_shows_only_the_chat_picked_last(stack: Stack, page: Any) -> None:
    """An answer about the chat picked before arrives after another chat was picked: it is not
    drawn over the chat now shown."""
    await page.get_by_role("button", name="Chat with Mira").click()
    await page.wait_for_url(re.compile(r"/chat/s-"))
    await page.get_by_text("The door creaks open.").wait_for(timeout=REPLY_MS)
    first = page.url.rsplit("/", 1)[1]
    manage = f"{stack.gateway_url.rstrip('/')}/manage?session={first}"
    await page.goto(manage)
    await page.get_by_label("Variable name").fill("tide")
    await page.get_by_label("Value (JSON)").fill("1")
    await page.get_by_role("button", name="Save variable").click()
    await page.locator("#variables td", has_text="tide").wait_for()

    held = asyncio.Event()

    async def late_for_the_first(route: Any) -> None:
        if f"/sessions/{first}/variables" in route.request.url:
            await held.wait()
        await route.continue_()

    await page.route(re.compile(r"/api/sessions/[^/]+/variables"), late_for_the_first)
    await page.goto(manage)
    chats = page.locator("#manage-session option")
    await chats.nth(1).wait_for(state="attached")
    other = next(
        value
        for value in await chats.evaluate_all("options => options.map(o => o.value)")
        if value != first
    )
    async with page.expect_response(lambda r: f"/sessions/{other}/variables" in r.url):
        await page.locator("#manage-session").select_option(other)
    async with page.expect_response(lambda r: f"/sessions/{first}/variables" in r.url):
        held.set()
    await page.wait_for_timeout(300)  # the page's handler of that answer has run
    assert await page.locator("#variables td", has_text="tide").count() == 0
