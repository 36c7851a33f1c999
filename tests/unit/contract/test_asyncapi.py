"""The committed AsyncAPI documents are exactly what the code generates (`tavern docs`)."""

from __future__ import annotations

import json
from pathlib import Path

from tavern_cli import asyncapi
from tavern_events.union import EVENT_MODELS

ROOT = Path(__file__).resolve().parents[3]


def test_committed_asyncapi_documents_are_current() -> None:
    stale = asyncapi.stale(ROOT)
    assert stale == [], f"stale AsyncAPI documents {stale}: run `./tavern docs` and commit"


def test_contract_document_names_every_event_model() -> None:
    document = json.loads(asyncapi.documents()["contract.json"])
    schemas = document["components"]["schemas"]
    documented = {s.get("properties", {}).get("type", {}).get("const") for s in schemas.values()}
    assert set(EVENT_MODELS) <= documented
    assert len(document["channels"]) == 5
