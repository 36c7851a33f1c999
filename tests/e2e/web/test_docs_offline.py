"""`/docs` renders Swagger UI in a real Chromium that may reach nothing but loopback: every
request to another host is aborted, and none is even tried."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import nats
import pytest

from tavern_runtime.provision import provision
from tests.e2e.web.conftest import opened
from tests.integration.gateway.conftest import served

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


async def test_the_api_docs_render_with_no_network_but_loopback(
    browser: Any, tmp_path: Path, nats_url: str, database_url: str
) -> None:
    nc = await nats.connect(nats_url)
    try:
        await provision(nc.jetstream())
    finally:
        await nc.close()
    elsewhere: list[str] = []

    async def loopback_only(route: Any) -> None:
        url = route.request.url
        if urlsplit(url).hostname in LOOPBACK:
            await route.continue_()
        else:
            elsewhere.append(url)
            await route.abort()

    async with (
        served(tmp_path, nats_url, database_url) as base,
        opened(browser, "docs-offline") as page,
    ):
        await page.context.route("**/*", loopback_only)
        await page.goto(f"{base}/docs")
        await page.get_by_role("heading", name="AgentTavern gateway").wait_for(timeout=20_000)
        await page.get_by_text("/api/login").first.wait_for()
    assert elsewhere == []
