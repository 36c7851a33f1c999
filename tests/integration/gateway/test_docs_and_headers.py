"""`/docs` is served whole from the gateway (no CDN), and every response, JSON, static files and
errors as well as pages, carries the security headers."""

from __future__ import annotations

import re

from fastapi import FastAPI

from tests.integration.gateway.conftest import Browser

LINKS = re.compile(r'(?:src|href)="([^"]+)"')


async def test_every_asset_the_docs_page_references_is_served_here(
    gateway: FastAPI, owner: Browser
) -> None:
    page = await owner.http.get("/docs")
    assert page.status_code == 200
    links = LINKS.findall(page.text)
    assert len(links) >= 3, page.text
    for link in links:
        assert link.startswith("/"), link
        assert not link.startswith("//"), link
        asset = await owner.http.get(link)
        assert asset.status_code == 200, link
    script = (await owner.http.get("/static/apidocs.js")).text
    assert "SwaggerUIBundle(" in script
    assert "http" not in script
    assert "http" not in page.headers["Content-Security-Policy"]
    assert (await owner.http.get("/openapi.json")).json()["info"]["title"] == gateway.title
    assert (await owner.http.get("/redoc")).status_code == 404  # ReDoc would load from a CDN


async def test_json_static_error_and_page_responses_carry_the_security_headers(
    gateway: FastAPI, owner: Browser
) -> None:
    stranger = await Browser(gateway).open()
    answers = {
        "json": await owner.http.get("/api/me"),
        "unauthenticated": await stranger.http.get("/api/me"),
        "openapi": await owner.http.get("/openapi.json"),
        "static": await owner.http.get("/static/app.css"),
        "docs asset": await owner.http.get("/docs/assets/swagger-ui.css"),
        "not found": await owner.http.get("/api/nothing-here"),
        "too large": await owner.post("/api/login", {"name": "x", "password": "y" * 2**21}),
        "page": await owner.http.get("/"),
    }
    assert answers["too large"].status_code == 413
    for what, answer in answers.items():
        found = answer.headers
        assert found.get("x-content-type-options") == "nosniff", what
        assert found.get("x-frame-options") == "DENY", what
        assert found.get("referrer-policy") == "no-referrer", what
        assert "frame-ancestors 'none'" in found.get("content-security-policy", ""), what
    assert answers["page"].headers["content-security-policy"].startswith("default-src 'self'")
    assert answers["json"].headers["content-security-policy"].startswith("default-src 'none'")
