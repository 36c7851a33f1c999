"""The whole stack as processes with the gateway, and a real Chromium driven by Playwright.

The browser is the distribution's `chromium` (`apt-get install chromium`), found by path; no
browser is ever downloaded. Missing in CI (`CI=true`) is a failure, elsewhere a skip that says
how to install it. Screenshots go to `test-artifacts/web/` (gitignored).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.stack import WITH_GATEWAY, Stack

CHROMIUM = os.environ.get("TAVERN_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[3] / "test-artifacts" / "web"


def chromium_path() -> str:
    found = CHROMIUM if Path(CHROMIUM).is_file() else shutil.which("chromium")
    if found:
        return found
    message = f"no Chromium at {CHROMIUM}: `apt-get install -y chromium` (or set TAVERN_CHROMIUM)"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
async def stack() -> AsyncIterator[Stack]:
    system = Stack(proxied=False, services=WITH_GATEWAY, env={"TAVERN_GATEWAY_PORT": "0"})
    try:
        await system.start()
        yield system
    except BaseException:
        print(system.tails())
        raise
    finally:
        await system.close()
        if not os.environ.get("TAVERN_KEEP_STACK"):
            system.remove()


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright

    executable = chromium_path()
    async with async_playwright() as p:
        launched = await p.chromium.launch(
            executable_path=executable, args=["--no-sandbox", "--disable-dev-shm-usage"]
        )
        try:
            yield launched
        finally:
            await launched.close()


async def shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


async def create_owner(page: Any, url: str, name: str, password: str) -> None:
    """A fresh install's first visit: `name` becomes the owner, signed in on the gallery."""
    await page.goto(url)
    await page.get_by_role("heading", name="Welcome to AgentTavern").wait_for()
    await page.get_by_label("User name").fill(name)
    await page.get_by_label("Password (10 characters or more)").fill(password)
    await page.get_by_role("button", name="Create owner account").click()
    await page.get_by_role("heading", name="Characters").wait_for()


async def sign_in(page: Any, url: str, name: str, password: str) -> None:
    """Sign `name` in on the sign-in page; the gallery shows."""
    await page.goto(f"{url.rstrip('/')}/login")
    await page.get_by_label("User name").fill(name)
    await page.get_by_label("Password").fill(password)
    await page.get_by_role("button", name="Sign in").click()
    await page.get_by_role("heading", name="Characters").wait_for()


@contextlib.asynccontextmanager
async def opened(browser: Any, failed_shot: str) -> AsyncIterator[Any]:
    """A page in a context of its own, closed after; a screenshot named `failed_shot` when the
    block fails."""
    context = await browser.new_context()
    page = await context.new_page()
    try:
        yield page
    except BaseException:
        await shot(page, failed_shot)
        raise
    finally:
        await context.close()
