"""`/docs`: Swagger UI (5.x, which reads OpenAPI 3.1) served from the `swagger-ui-py`
package's copy of its dist files, so the API's documentation works on a machine without
internet (FastAPI's default page loads it from a CDN)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from tavern_gateway.headers import DOCS_CSP

ASSETS_URL = "/docs/assets"


def _assets_dir() -> Path:
    """The package's `static/` folder, found without importing it (its `__init__` loads the
    adapters of a dozen web frameworks)."""
    spec = importlib.util.find_spec("swagger_ui")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("swagger-ui-py is not installed (services/gateway depends on it)")
    return Path(next(iter(spec.submodule_search_locations))) / "static"


PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title} - API</title>
<link rel="stylesheet" href="{assets}/swagger-ui.css">
<link rel="icon" type="image/png" href="{assets}/favicon-32x32.png">
</head>
<body>
<div id="swagger-ui" data-openapi-url="{openapi}"></div>
<script src="{assets}/swagger-ui-bundle.js"></script>
<script src="/static/apidocs.js"></script>
</body>
</html>
"""


def assets() -> StaticFiles:
    return StaticFiles(directory=_assets_dir())


def page(title: str, openapi_url: str) -> HTMLResponse:
    html = PAGE.format(title=title, assets=ASSETS_URL, openapi=openapi_url)
    return HTMLResponse(html, headers={"Content-Security-Policy": DOCS_CSP})
