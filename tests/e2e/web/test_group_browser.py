"""A group chat in the web app, in a real Chromium against the whole stack as processes: the
owner starts one with two characters, and each reply shows its speaker's name and avatar."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tavern_events import subjects
from tests.e2e.web.conftest import create_owner, opened, shot, sign_in
from tests.reliability.driver import Driver
from tests.reliability.stack import Stack

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(600)]

CARDS = Path(__file__).resolve().parents[2] / "fixtures" / "cards"
REPLY_S = 30_000  # ms
MEMBERS = ("Mira", "苏青")


async def test_a_group_chat_shows_each_speakers_name_and_avatar(stack: Stack, browser: Any) -> None:
    async with opened(browser, "failed-group-chat") as page:
        await _group_chat(stack, page)


async def _group_chat(stack: Stack, page: Any) -> None:
    await create_owner(page, stack.gateway_url, "ada", "lighthouse-keeper-42")
    for card, name in (("v2_mira.png", "Mira"), ("v3_suqing.png", "苏青")):
        await page.get_by_label("Card, lorebook or persona file").set_input_files(str(CARDS / card))
        await page.get_by_text(f"Imported character {name}.").wait_for()
    for name in MEMBERS:  # an import answers once the projector, which names speakers, has it
        assert await _projected(stack, name)

    # Two members picked: the chat is a group (each member opens it with its greeting).
    for name in MEMBERS:
        await page.get_by_role("checkbox", name=name).check()
    await page.get_by_role("button", name="Start chat").click()
    await page.wait_for_url(re.compile(r"/chat/s-"))
    await page.get_by_text(re.compile("group of 2")).wait_for()
    await page.get_by_role(
        "heading", name=re.compile(r"^Group chat with (Mira, 苏青|苏青, Mira)$")
    ).wait_for()
    await page.get_by_role("button", name="Let 苏青 speak").wait_for()
    await page.get_by_role("button", name="Let Mira speak").wait_for()
    for greeting in ("The door creaks open.", "门吱呀一声开了。"):  # every member greets
        await page.get_by_text(greeting, exact=True).wait_for()

    # A message: the members the strategy picks answer, each under its own name and avatar.
    turn = await _send(page, "Good evening, both of you.")
    replies = turn.locator(".msg.assistant[data-streaming='false'][data-speaker]")
    await replies.first.wait_for(timeout=REPLY_S)
    for index in range(await replies.count()):
        reply = replies.nth(index)
        speaker = await reply.get_attribute("data-speaker")
        assert speaker in MEMBERS
        await reply.locator(".who", has_text=speaker).wait_for()
        await reply.get_by_text(f"{speaker} here.").first.wait_for()
        await reply.get_by_role("img", name=f"Avatar of {speaker}").wait_for()
    await page.wait_for_function(
        "() => [...document.querySelectorAll('#log img.speaker-avatar')].every("
        "i => i.complete && i.naturalWidth > 0)"
    )

    # The user's own choice: 苏青 answers now.
    turns = await page.locator("#log li.turn[data-outcome]").count()
    await page.get_by_role("button", name="Let 苏青 speak").click()
    turn = page.locator("#log li.turn[data-outcome]").nth(turns)
    await turn.wait_for(timeout=REPLY_S)
    chosen = turn.locator(".msg.assistant[data-speaker='苏青']")
    await chosen.get_by_role("img", name="Avatar of 苏青").wait_for()
    await chosen.get_by_text("苏青 here.").first.wait_for()
    await shot(page, "group-chat")


async def test_members_picked_stay_picked_when_the_gallery_answers_late(
    stack: Stack, browser: Any
) -> None:
    """The index page's first listing of characters can answer after the user has already
    checked members (a slow projector, a quick hand): it must not redraw the form over them."""
    held = asyncio.Event()
    listings = 0

    async def late_first_listing(route: Any) -> None:
        nonlocal listings
        listings += 1
        if listings == 1:  # the page's own listing, answered after the picks
            await held.wait()
        await route.continue_()

    async with opened(browser, "failed-late-gallery") as page:
        await sign_in(page, stack.gateway_url, "ada", "lighthouse-keeper-42")
        await page.get_by_role("checkbox", name="Mira").wait_for()
        await page.route("**/api/characters", late_first_listing)
        await page.reload()
        await page.get_by_role("heading", name="Characters").wait_for()
        # The form is empty until the held listing answers; the picks come from an import's
        # listing (the user imports a card while the page is still loading).
        await page.get_by_label("Card, lorebook or persona file").set_input_files(
            str(CARDS / "v2_mira.png")
        )
        await page.get_by_text("Already imported character Mira.").wait_for()
        for name in MEMBERS:
            await page.get_by_role("checkbox", name=name).check()
        held.set()
        await page.wait_for_function("() => document.body.dataset.ready === 'true'")
        for name in MEMBERS:
            assert await page.get_by_role("checkbox", name=name).is_checked(), name
        await page.get_by_role("button", name="Start chat").click()
        await page.wait_for_url(re.compile(r"/chat/s-"))
        await page.get_by_text(re.compile("group of 2")).wait_for()


async def _send(page: Any, text: str) -> Any:
    """Send a message with the keyboard; the turn that answers it, once it has ended."""
    turns = await page.locator("#log li.turn[data-outcome]").count()
    box = page.get_by_label("Message")
    await box.fill(text)
    await box.press("Enter")
    turn = page.locator("#log li.turn[data-outcome]").nth(turns)
    await turn.wait_for(timeout=REPLY_S)
    return turn


async def _projected(stack: Stack, name: str) -> bool:
    """Whether the projector has the card the gateway says was imported (its assets lag)."""
    assert stack.nc is not None
    body = json.dumps({"character": name, "fields": ["name"]}).encode()
    reply = await stack.nc.request(subjects.rpc("projector", "character.get"), body, timeout=5)
    return bool(json.loads(reply.data).get("name") == name)


async def test_the_chat_page_follows_member_and_mode_changes_without_a_reload(
    stack: Stack, browser: Any
) -> None:
    """A member muted (here by the operator's CLI command) loses its button at once; a mode
    switched shows in the binding line and in the picker, after a reload too."""
    assert stack.nc is not None
    driver = Driver(stack.nc)
    async with opened(browser, "failed-group-changes") as page:
        await sign_in(page, stack.gateway_url, "ada", "lighthouse-keeper-42")
        for name in MEMBERS:
            await page.get_by_role("checkbox", name=name).check()
        await page.get_by_role("button", name="Start chat").click()
        await page.wait_for_url(re.compile(r"/chat/s-"))
        await page.get_by_role("button", name="Let 苏青 speak").wait_for()
        session_id = page.url.rsplit("/", 1)[1]
        suqing = json.loads(
            (
                await stack.nc.request(
                    subjects.rpc("projector", "character.get"),
                    json.dumps({"character": "苏青", "fields": ["name"]}).encode(),
                    timeout=5,
                )
            ).data
        )["source"]["id"]

        await driver.command(session_id, "member", {"action": "mute", "character_id": suqing})
        await page.wait_for_function(
            "() => [...document.querySelectorAll('#group-controls button')].some("
            "b => b.textContent === 'Let 苏青 speak' && b.disabled)",
            timeout=REPLY_S,
        )
        assert await page.get_by_role("button", name="Let Mira speak").is_enabled()

        await page.locator("#mode").select_option("agent-managed")
        await page.get_by_role("button", name="Switch mode").click()
        await page.locator("#binding", has_text="agent-managed").wait_for(timeout=REPLY_S)
        assert "group of 2" in (await page.locator("#binding").text_content() or "")
        await page.reload()
        await page.locator("#binding", has_text="agent-managed").wait_for(timeout=REPLY_S)
        assert await page.locator("#mode").input_value() == "agent-managed"
        disabled = page.get_by_role("button", name="Let 苏青 speak")
        await disabled.wait_for()
        assert await disabled.is_disabled(), "muted, after a reload too"


async def test_the_new_chat_form_never_drops_a_choice_silently(stack: Stack, browser: Any) -> None:
    """One member ticked is a chat with that character; a character picked and members ticked
    is refused with a reason, not quietly made into either."""
    async with opened(browser, "failed-new-chat-form") as page:
        await sign_in(page, stack.gateway_url, "ada", "lighthouse-keeper-42")
        await page.get_by_label("Character", exact=True).select_option(label="Mira")
        for name in MEMBERS:
            await page.get_by_role("checkbox", name=name).check()
        await page.get_by_role("button", name="Start chat").click()
        await page.get_by_role("alert").get_by_text(re.compile("not both")).wait_for()
        assert "/chat/" not in page.url

        await page.get_by_label("Character", exact=True).select_option(value="")
        await page.get_by_role("checkbox", name="Mira").uncheck()
        await page.get_by_role("button", name="Start chat").click()
        await page.wait_for_url(re.compile(r"/chat/s-"))
        await page.get_by_text("门吱呀一声开了。", exact=True).wait_for()
        await page.locator("#binding", has_text="character").wait_for()
        assert "group" not in (await page.locator("#binding").text_content() or "")
