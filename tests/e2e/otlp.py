"""A small OTLP/HTTP trace receiver on loopback for the tests: it decodes each export
(protobuf, `opentelemetry-proto`) into plain span records and keeps them."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

PATH = "/v1/traces"


@dataclass(frozen=True)
class Received:
    service: str
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: int
    links: tuple[tuple[str, str], ...]
    """(trace id, span id) of each link."""
    attributes: dict[str, object]


class Receiver:
    def __init__(self) -> None:
        self.spans: list[Received] = []
        self.requests = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The base URL, as `TAVERN_OTLP_ENDPOINT` takes it."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def add(self, body: bytes) -> None:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        found = [
            _record(_service(rs.resource.attributes), span)
            for rs in request.resource_spans
            for ss in rs.scope_spans
            for span in ss.spans
        ]
        with self._lock:
            self.spans.extend(found)
            self.requests += 1

    def snapshot(self) -> list[Received]:
        with self._lock:
            return list(self.spans)


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path != PATH:
                self.send_error(404)
                return
            receiver.add(body)
            reply = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


def _service(attributes: Iterable[KeyValue]) -> str:
    for kv in attributes:
        if kv.key == "service.name":
            return str(kv.value.string_value)
    return ""


def _record(service: str, span: Span) -> Received:
    return Received(
        service=service,
        name=span.name,
        trace_id=span.trace_id.hex(),
        span_id=span.span_id.hex(),
        parent_id=span.parent_span_id.hex(),
        kind=int(span.kind),
        links=tuple((k.trace_id.hex(), k.span_id.hex()) for k in span.links),
        attributes={a.key: _value(a.value) for a in span.attributes},
    )


def _value(value: AnyValue) -> object:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None
