"""Where OTLP trace requests go: a JSON-lines file, or an OTLP/HTTP endpoint (``POST /v1/traces``).

The file holds one ``ExportTraceServiceRequest`` per line in OTLP/JSON (the OpenTelemetry Collector's
``otlpjsonfile`` receiver and the OTLP file exporter's layout). It is written beside its final name, owner-only,
and renamed into place only once whole: a stopped export leaves no file that looks complete.

An endpoint gets each request as a POST, in protobuf (the default) or JSON. It answers 2xx (perhaps with a
partial success naming rejected spans), a retryable 429/502/503/504 (tried again after its ``Retry-After`` or a
doubling wait, five tries in all), or anything else, which stops the export. Header values (a backend's API key)
are sent and never shown; a URL is shown without its user and password.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

import httpx

from fae.errors import ExportError, first_line
from fae.report.otlp import partial_success
from fae.store.files import PRIVATE_MODE, fsync_file, refuse_link, remove_stale

PROTOBUF, JSON = "http/protobuf", "http/json"
PROTOCOLS = (PROTOBUF, JSON)
CONTENT_TYPES = {PROTOBUF: "application/x-protobuf", JSON: "application/json"}
RETRYABLE = frozenset({429, 502, 503, 504})
ATTEMPTS = 5
MAX_WAIT_S = 60.0


def is_endpoint(target: str) -> bool:
    """A URL (``scheme://``): an endpoint, refused unless http or https; anything else names a file."""
    return "://" in target


def shown_url(url: str) -> str:
    """A URL without its user and password (what error lines and the summary show)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "the endpoint"
    host = f"[{host}]" if ":" in host else host
    return urlunsplit((parts.scheme, host + port, parts.path, "", ""))


def traces_url(endpoint: str) -> str:
    """The URL traces are posted to: the endpoint as given when it ends in ``/v1/traces``, else with it added."""
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ExportError(f"{endpoint!r} is not an http:// or https:// endpoint")
    path = parts.path.rstrip("/")
    if not path.endswith("/v1/traces"):
        path += "/v1/traces"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def env_headers(environ: Mapping[str, str]) -> dict[str, str]:
    """Headers from ``OTEL_EXPORTER_OTLP_TRACES_HEADERS`` (or ``OTEL_EXPORTER_OTLP_HEADERS``): ``k=v,k2=v2``,
    values percent-encoded, as the OpenTelemetry exporters read them."""
    raw = environ.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS") or environ.get("OTEL_EXPORTER_OTLP_HEADERS") or ""
    found = {}
    for item in raw.split(","):
        key, sep, value = item.partition("=")
        if sep and key.strip():
            found[key.strip()] = unquote(value.strip())
    return found


class FileSink:
    """Requests as OTLP/JSON lines, into ``path`` once all are written."""

    protocol = JSON

    def __init__(self, path: Path):
        self.path = path
        self.partial = path.with_name(f".{path.name}.partial")
        refuse_link(path, "the export file")
        remove_stale(self.partial)
        try:
            fd = os.open(self.partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, PRIVATE_MODE)
        except OSError as exc:
            raise ExportError(f"cannot create {self.partial}: {exc.strerror}") from None
        self.handle = os.fdopen(fd, "wb")
        self.shown = str(path)

    def send(self, body: bytes) -> tuple[int, str]:
        try:
            self.handle.write(body + b"\n")
        except OSError as exc:
            raise ExportError(f"cannot write {self.partial}: {exc.strerror}") from None
        return 0, ""

    def close(self, finished: bool) -> None:
        try:
            self.handle.close()
            if finished:
                fsync_file(self.partial)
                os.replace(self.partial, self.path)
            else:
                self.partial.unlink(missing_ok=True)
        except OSError as exc:
            raise ExportError(f"cannot write {self.path}: {exc.strerror}") from None


class EndpointSink:
    """Requests POSTed to an OTLP/HTTP endpoint, one at a time, retried while the endpoint asks for it."""

    def __init__(
        self,
        endpoint: str,
        protocol: str = PROTOBUF,
        headers: Mapping[str, str] | None = None,
        timeout_s: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
    ):
        if protocol not in PROTOCOLS:
            raise ExportError(f"unknown OTLP protocol {protocol!r}; use {' or '.join(PROTOCOLS)}")
        self.url = traces_url(endpoint)
        self.shown = shown_url(self.url)
        self.protocol = protocol
        self.sleep = sleep
        self._wait = 1.0
        self.client = httpx.Client(
            timeout=timeout_s, headers={**(headers or {}), "content-type": CONTENT_TYPES[protocol]}
        )

    def send(self, body: bytes) -> tuple[int, str]:
        """Post one request; returns how many of its spans the endpoint said it rejected, and why."""
        problem = ""
        for attempt in range(ATTEMPTS):
            if attempt:
                self.sleep(self._wait)
            try:
                reply = self.client.post(self.url, content=body)
            except httpx.HTTPError as exc:
                problem = f"cannot reach it ({type(exc).__name__}: {first_line(str(exc)) or 'no detail'})"
                self._wait = min(MAX_WAIT_S, 2.0**attempt)
                continue
            if 200 <= reply.status_code < 300:
                rejected, message = partial_success(reply.content, self.protocol)
                return rejected, message or ("no reason given" if rejected else "")
            if reply.status_code not in RETRYABLE:
                raise ExportError(f"{self.shown} refused the traces: HTTP {reply.status_code} {_said(reply)}".rstrip())
            problem = f"HTTP {reply.status_code} {_said(reply)}".rstrip()
            self._wait = _retry_after(reply.headers.get("retry-after"), min(MAX_WAIT_S, 2.0**attempt))
        raise ExportError(f"{self.shown} did not take the traces after {ATTEMPTS} tries: {problem}")

    def close(self, finished: bool) -> None:
        self.client.close()


def _said(reply: httpx.Response) -> str:
    """The first line of what an endpoint answered, short (its status message or error text)."""
    return first_line(reply.text[:300]) if reply.content else ""


def _retry_after(value: str | None, default: float) -> float:
    try:
        return min(MAX_WAIT_S, max(0.0, float(value))) if value is not None else default
    except ValueError:
        return default  # an HTTP date: the doubling wait stands in for it
