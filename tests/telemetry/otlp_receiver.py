"""A real OTLP/HTTP trace receiver for tests: an HTTP server on a loopback port that decodes
the protobuf payloads exporters post to /v1/traces, as a collector would."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    return None if kind is None else getattr(value, kind)


@dataclass
class ReceivedSpan:
    name: str
    trace_id: str  # hex
    span_id: str
    parent_span_id: str  # "" for a root span
    kind: int
    start: int  # ns since the epoch
    end: int
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    status_code: int  # 0 unset, 1 ok, 2 error
    status_message: str
    service: str


@dataclass
class Collector:
    url: str
    spans: list[ReceivedSpan] = field(default_factory=list)
    requests: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, request: ExportTraceServiceRequest) -> None:
        with self._lock:
            self.requests += 1
            for resource_spans in request.resource_spans:
                resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        self.spans.append(
                            ReceivedSpan(
                                name=span.name,
                                trace_id=span.trace_id.hex(),
                                span_id=span.span_id.hex(),
                                parent_span_id=span.parent_span_id.hex(),
                                kind=span.kind,
                                start=span.start_time_unix_nano,
                                end=span.end_time_unix_nano,
                                attributes={a.key: _value(a.value) for a in span.attributes},
                                events=[
                                    (e.name, {a.key: _value(a.value) for a in e.attributes})
                                    for e in span.events
                                ],
                                status_code=span.status.code,
                                status_message=span.status.message,
                                service=str(resource.get("service.name")),
                            )
                        )

    def wait_for(
        self, found: Callable[[list[ReceivedSpan]], bool], timeout: float = 15.0
    ) -> list[ReceivedSpan]:
        """The spans received, once `found(spans)` holds (AssertionError after `timeout`)."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                spans = list(self.spans)
            if found(spans):
                return spans
            if time.monotonic() > deadline:
                names = sorted(s.name for s in spans)
                raise AssertionError(f"the collector did not get the spans; it has {names}")
            time.sleep(0.05)


@contextmanager
def otlp_collector() -> Iterator[Collector]:
    collector: Collector

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.path != "/v1/traces" or self.headers.get("Content-Type") != (
                "application/x-protobuf"
            ):
                self.send_response(404)
                self.end_headers()
                return
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            collector.add(request)
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet test output

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    collector = Collector(f"http://127.0.0.1:{server.server_address[1]}/v1/traces")
    thread = threading.Thread(target=server.serve_forever, name="otlp-collector", daemon=True)
    thread.start()
    try:
        yield collector
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
