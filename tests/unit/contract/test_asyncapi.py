"""docs/asyncapi: what the code generates (`tavern docs`), parsed by an AsyncAPI 3.0 parser, and
complete enough to build a client from: every RPC with a request, a reply and the common error,
every stream channel with its parameters, headers and stream, every reference resolvable."""

from __future__ import annotations

import argparse
import copy
import importlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from asyncapi3.models.asyncapi import AsyncAPI3
from jsonschema import Draft202012Validator
from pydantic import ValidationError

from tavern_cli import asyncapi
from tavern_cli.commands import docs
from tavern_events import rpc, streams
from tavern_events.union import EVENT_MODELS
from tavern_runtime.unknownops import served_subjects

ROOT = Path(__file__).resolve().parents[3]
KEY = re.compile(r"^[A-Za-z0-9_-]+$")
"""Component, channel and operation keys: the spec allows dots too; some tools do not."""


@pytest.fixture(scope="module")
def documents() -> dict[str, dict[str, Any]]:
    return {name: json.loads(text) for name, text in asyncapi.documents().items()}


def _resolve(document: dict[str, Any], ref: str) -> Any:
    """The node `ref` points at, following references on the way (KeyError: nowhere)."""
    found: Any = document
    for part in ref.removeprefix("#/").split("/"):
        found = found[part.replace("~1", "/").replace("~0", "~")]
        if isinstance(found, dict) and set(found) == {"$ref"}:
            found = _resolve(document, found["$ref"])
    return found


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        own = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return own + [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


def _payload(document: dict[str, Any], message_ref: str) -> dict[str, Any]:
    message = _resolve(document, message_ref)
    payload = message["payload"]
    return dict(_resolve(document, payload["$ref"])) if "$ref" in payload else dict(payload)


def test_committed_asyncapi_documents_are_current() -> None:
    stale = asyncapi.stale(ROOT)
    assert stale == [], f"stale AsyncAPI documents {stale}: run `./tavern docs` and commit"


def test_every_document_parses_as_asyncapi_3(documents: dict[str, dict[str, Any]]) -> None:
    for name, document in documents.items():
        parsed = AsyncAPI3.model_validate(document)
        assert parsed.asyncapi == "3.0.0", name
        assert parsed.operations is not None
        assert parsed.channels is not None


def test_the_parser_refuses_what_asyncapi_3_does_not_allow(
    documents: dict[str, dict[str, Any]],
) -> None:
    """The parser is a check, not a formality: a 2.x-style action and a key with `:` fail."""
    broken = copy.deepcopy(documents["ledger.json"])
    broken["operations"]["ledger_recall"]["action"] = "subscribe"
    with pytest.raises(ValidationError):
        AsyncAPI3.model_validate(broken)
    broken = copy.deepcopy(documents["ledger.json"])
    messages = broken["components"]["messages"]
    messages["ledger:recall:request"] = messages["ledger_recall_request"]
    with pytest.raises(ValidationError):
        AsyncAPI3.model_validate(broken)


def test_every_reference_resolves_and_every_key_is_plain(
    documents: dict[str, dict[str, Any]],
) -> None:
    for name, document in documents.items():
        for ref in _refs(document):
            assert ref.startswith("#/"), (name, ref)
            _resolve(document, ref)  # KeyError when it points nowhere
        keyed = [document["channels"], document["operations"], *document["components"].values()]
        bad = [k for mapping in keyed for k in mapping if not KEY.fullmatch(k)]
        assert bad == [], (name, bad)


def test_every_schema_is_a_valid_json_schema(documents: dict[str, dict[str, Any]]) -> None:
    for name, schema in documents["contract.json"]["components"]["schemas"].items():
        Draft202012Validator.check_schema(schema)
        assert schema != {"type": "null"}, name


def test_every_rpc_has_an_object_request_a_reply_and_the_common_error(
    documents: dict[str, dict[str, Any]],
) -> None:
    document = documents["contract.json"]
    operations = {k: op for k, op in document["operations"].items() if op["action"] == "receive"}
    assert len(operations) == len(rpc.ALL)
    for key, op in operations.items():
        request = _payload(document, op["messages"][0]["$ref"])
        assert request["type"] == "object", key
        no_body = key.endswith(("_ping", "projector_status"))
        assert no_body or request.get("properties"), f"{key}: a request with no fields"
        headers = _resolve(document, op["messages"][0]["$ref"])["headers"]
        assert "Tavern-Principal" in headers["properties"], key
        replies = [m["$ref"] for m in op["reply"]["messages"]]
        assert len(replies) == 2, key
        result, error = (_payload(document, r) for r in replies)
        assert result["not"] == {"required": ["error"]}, key
        assert error["required"] == ["error"], key
        reply_channel = _resolve(document, op["reply"]["channel"]["$ref"])
        assert reply_channel["address"] is None, key
        assert all(r.startswith(op["reply"]["channel"]["$ref"] + "/messages/") for r in replies)


def test_rpc_replies_are_documented_by_their_fields(documents: dict[str, dict[str, Any]]) -> None:
    """The replies a client reads most are typed field by field, nested items included."""
    schemas = documents["contract.json"]["components"]["schemas"]
    recall = schemas["rpc_ledger_RecallReply"]
    assert set(recall["required"]) == {"text", "count"}
    search = schemas["rpc_stores_MemorySearchReply"]
    assert search["properties"]["hits"]["items"] == {"$ref": "#/components/schemas/MemoryHit"}
    history = schemas["rpc_projector_HistoryReply"]
    assert {"hits", "sourceCount", "truncated", "capped"} <= set(history["required"])


def test_stream_channels_document_parameters_headers_and_their_stream(
    documents: dict[str, dict[str, Any]],
) -> None:
    document = documents["contract.json"]
    by_stream = {}
    for key, channel in document["channels"].items():
        stream = channel.get("x-tavern-stream")
        if stream is None:
            continue
        by_stream[stream["name"]] = channel
        named = set(re.findall(r"\{(\w+)\}", channel["address"]))
        assert named == set(channel["parameters"]), key
        spec = streams.BY_NAME[stream["name"]]
        assert stream["subjects"] == list(spec.subjects)
        assert (stream["retention"], stream["storage"]) == ("limits", "file")
        assert stream["max_age_s"] == spec.max_age_s
        message = _resolve(document, channel["messages"]["event"]["$ref"])
        assert "Nats-Msg-Id" in message["headers"]["properties"], key
    assert set(by_stream) == {s.name for s in streams.ALL}
    session = _resolve(document, by_stream["SESSIONS"]["messages"]["event"]["$ref"])
    assert {
        "Nats-Expected-Last-Subject-Sequence",
        "Nats-Expected-Last-Subject-Sequence-Subject",
        "Nats-Batch-Id",
        "Nats-Batch-Sequence",
        "Nats-Batch-Commit",
    } <= set(session["headers"]["properties"])
    assert session["correlationId"]["location"] == "$message.payload#/correlation_id"
    for model in EVENT_MODELS.values():
        if "session_id" in model.model_fields and "seq" in model.model_fields:
            assert "correlation_id" in model.model_fields, model
    inputs = _resolve(document, by_stream["INPUTS"]["messages"]["event"]["$ref"])
    assert set(inputs["headers"]["required"]) == {"Nats-Msg-Id", "Tavern-Principal"}


def test_contract_document_names_every_event_model(documents: dict[str, dict[str, Any]]) -> None:
    schemas = documents["contract.json"]["components"]["schemas"]
    documented = {s.get("properties", {}).get("type", {}).get("const") for s in schemas.values()}
    assert set(EVENT_MODELS) <= documented


@pytest.mark.parametrize("service", rpc.SERVICES)
def test_the_catalog_is_exactly_what_each_service_serves(service: str) -> None:
    app_module = importlib.import_module(f"tavern_{service}.app")
    config = importlib.import_module(f"tavern_{service}.config")
    settings_cls = next(
        getattr(config, n) for n in dir(config) if n.endswith("Settings") and n != "TavernSettings"
    )
    app = app_module.build_app(settings_cls(nats_url="nats://127.0.0.1:1"))
    served = set(served_subjects(app.broker.subscribers, service))
    documented = {r.subject for r in rpc.of_service(service)}
    assert served == documented


def test_services_parse_requests_with_the_contract_models() -> None:
    """One definition: the services import the contract's request models."""
    from tavern_consolidator import requests as consolidator
    from tavern_ledger import requests as ledger
    from tavern_ledger.consolidation import requests as consolidation
    from tavern_ledger.toolcalls import rpc as stores
    from tavern_projector import replays
    from tavern_projector.domain import history
    from tavern_projector.domain import requests as projector

    assert ledger.RecallBody is rpc.BY_SUBJECT["tavern.rpc.ledger.recall"].request
    assert (
        consolidation.RuleActivateBody
        is rpc.BY_SUBJECT["tavern.rpc.ledger.consolidation.rule.activate"].request
    )
    for op in stores.OPERATIONS:
        assert op.request is rpc.BY_SUBJECT[f"tavern.rpc.ledger.{op.name}"].request
    # history and replays import the models for their own use, without re-exporting them
    history_request = vars(history)["HistoryRequest"]
    assert history_request is rpc.BY_SUBJECT["tavern.rpc.projector.history.search"].request
    assert projector.LoreRequest is rpc.BY_SUBJECT["tavern.rpc.projector.lore.search"].request
    assert consolidator.DistilBody is rpc.BY_SUBJECT["tavern.rpc.consolidator.distil"].request
    replay_request = vars(replays)["ReplayStartRequest"]
    assert replay_request is rpc.BY_SUBJECT["tavern.rpc.projector.replay.start"].request
    assert (
        ledger.ObservationListBody is rpc.BY_SUBJECT["tavern.rpc.ledger.observation.list"].request
    )


def test_docs_check_fails_on_a_drifted_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`tavern docs --check`, the CI gate: 0 when current, 1 naming the document that drifted."""
    monkeypatch.chdir(tmp_path)
    assert docs.run(argparse.Namespace(check=False), []) == 0
    assert docs.run(argparse.Namespace(check=True), []) == 0
    drifted = tmp_path / "docs" / "asyncapi" / "ledger.json"
    drifted.write_text(drifted.read_text().replace("ledger_recall", "ledger_recollect"))
    assert docs.run(argparse.Namespace(check=True), []) == 1
    assert "stale: docs/asyncapi/ledger.json" in capsys.readouterr().out
