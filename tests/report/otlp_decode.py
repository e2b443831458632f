"""OTLP traces read back with the official definitions (opentelemetry-proto), and the attribute names of the
semantic conventions (opentelemetry-semantic-conventions), for the tests of ``fae export --otel``."""

from __future__ import annotations

import ast
import base64
import importlib
import json
import pkgutil
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import opentelemetry.semconv._incubating.attributes as incubating
import opentelemetry.semconv.attributes as stable
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def _ids_as_base64(node: Any) -> Any:
    """OTLP/JSON writes ids in hex where the protobuf JSON mapping reads base64: the one step between them."""
    if isinstance(node, dict):
        return {
            key: base64.b64encode(bytes.fromhex(value)).decode() if key in ID_FIELDS else _ids_as_base64(value)
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [_ids_as_base64(item) for item in node]
    return node


def from_json_lines(data: bytes) -> list[ExportTraceServiceRequest]:
    """Each line one request, parsed strictly (an unknown or mistyped field fails)."""
    return [
        json_format.ParseDict(_ids_as_base64(json.loads(line)), ExportTraceServiceRequest())
        for line in data.splitlines()
        if line.strip()
    ]


def from_protobuf(data: bytes) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    request.ParseFromString(data)
    return request


def value(found: AnyValue) -> Any:
    kind = found.WhichOneof("value")
    if kind == "array_value":
        return [value(item) for item in found.array_value.values]
    return getattr(found, kind) if kind else None


def attributes(pairs: Iterable[Any]) -> dict[str, Any]:
    return {pair.key: value(pair.value) for pair in pairs}


@dataclass
class Trace:
    root: Span
    spans: list[Span]

    @property
    def root_attributes(self) -> dict[str, Any]:
        return attributes(self.root.attributes)

    def named(self, prefix: str) -> list[Span]:
        return [span for span in self.spans if span.name.startswith(prefix)]


def spans_of(requests: Iterable[ExportTraceServiceRequest]) -> list[Span]:
    return [
        span
        for request in requests
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]


def traces(requests: Iterable[ExportTraceServiceRequest]) -> dict[str, Trace]:
    """Traces by run id (the root span's ``fae.run.id``); each must have exactly one root."""
    by_trace: dict[bytes, list[Span]] = {}
    for span in spans_of(requests):
        by_trace.setdefault(span.trace_id, []).append(span)
    found = {}
    for spans in by_trace.values():
        roots = [span for span in spans if not span.parent_span_id]
        assert len(roots) == 1, [span.name for span in roots]
        found[attributes(roots[0].attributes)["fae.run.id"]] = Trace(roots[0], [s for s in spans if s is not roots[0]])
    return found


def _constants(package: Any) -> dict[str, str]:
    """Every attribute name a semantic-conventions package defines, with the text documenting it."""
    found: dict[str, str] = {}
    for module_info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{module_info.name}")
        tree = ast.parse(Path(module.__file__).read_text())
        body = tree.body
        for index, node in enumerate(body):
            if isinstance(node, ast.AnnAssign) and isinstance(node.value, ast.Constant):
                after = body[index + 1] if index + 1 < len(body) else None
                doc = after.value.value if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant) else ""
                found[node.value.value] = str(doc)
    return found


@cache
def semconv_names() -> tuple[frozenset[str], frozenset[str]]:
    """(every defined attribute name, the names replaced or removed by a later one)."""
    stable_names = _constants(stable)
    incubating_names = _constants(incubating)
    replaced = {
        name
        for name, doc in incubating_names.items()
        if ("Replaced by" in doc or "Removed" in doc) and name not in stable_names
    }
    return frozenset(stable_names) | frozenset(incubating_names), frozenset(replaced)


def enum_values(name: str) -> set[str]:
    """The well-known values of a gen_ai enum attribute (e.g. ``GenAiProviderNameValues``)."""
    module = importlib.import_module("opentelemetry.semconv._incubating.attributes.gen_ai_attributes")
    return {member.value for member in getattr(module, name)}
