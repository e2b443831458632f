"""A tiny FHIR stand-in served over real HTTP, and a helper to serve any ASGI app on 127.0.0.1.

The stand-in is a last-resort fake, kept because the MCP tools must be tested
against FHIR answers the embedded server may never give: absolute paging links
on a host the client cannot reach (a FHIR server behind a proxy), an HTML 500,
and OperationOutcomes on 404/410/412/422. It answers under any path ending in a
``fhir`` segment, each such prefix a separate store (as sandboxes are).
"""

from __future__ import annotations

import itertools
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlencode

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

ADVERTISED_ORIGIN = "http://fhir-upstream.invalid:8080"
"""The origin the stand-in writes into its links: unreachable on purpose, as a server behind a proxy."""

KNOWN_TYPES = ("Patient", "Observation")
GENDERS = ("male", "female", "other", "unknown")
FHIR_JSON = "application/fhir+json"


def outcome(status: int, code: str, diagnostics: str, expression: str | None = None) -> JSONResponse:
    issue: dict[str, Any] = {"severity": "error", "code": code, "diagnostics": diagnostics}
    if expression:
        issue["expression"] = [expression]
    body = {"resourceType": "OperationOutcome", "issue": [issue]}
    return JSONResponse(body, status_code=status, media_type=FHIR_JSON)


class StandinFhir:
    """In-memory stores keyed by base path, and a log of every request seen."""

    def __init__(self) -> None:
        self.stores: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
        self.deleted: set[tuple[str, str, str]] = set()
        self.requests: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self.app = Starlette(routes=[Route("/{path:path}", self.handle, methods=["GET", "POST", "PUT", "DELETE"])])

    async def handle(self, request: Request) -> Response:
        segments = request.path_params["path"].strip("/").split("/")
        if "fhir" not in segments:
            return HTMLResponse("<h1>not a FHIR base</h1>", status_code=404)
        at = segments.index("fhir")
        prefix = "/" + "/".join(segments[: at + 1])
        rest = segments[at + 1 :]
        self.requests.append(
            {
                "method": request.method,
                "prefix": prefix,
                "rest": rest,
                "query": list(request.query_params.multi_items()),
                "headers": dict(request.headers),
            }
        )
        store = self.stores.setdefault(prefix, {})
        if rest == ["metadata"]:
            return JSONResponse(
                {
                    "resourceType": "CapabilityStatement",
                    "fhirVersion": "4.0.1",
                    "rest": [{"mode": "server", "resource": [{"type": t} for t in KNOWN_TYPES]}],
                },
                media_type=FHIR_JSON,
            )
        if rest and rest[0] == "Basic":  # a real type, so the tools send it; this server breaks on it
            return HTMLResponse("<html><body>Internal explosion</body></html>", status_code=500)
        if not rest or rest[0] not in KNOWN_TYPES:
            return outcome(404, "not-supported", f"Unknown resource type {rest[0] if rest else ''!r}")
        kind = rest[0]
        if len(rest) == 1 and request.method == "POST":
            return await self.create(request, store, kind)
        if len(rest) == 1 and request.method == "GET":
            return self.search(request, store, prefix, kind)
        if len(rest) == 2:
            return await self.instance(request, store, prefix, kind, rest[1])
        return outcome(400, "not-supported", "unsupported interaction")

    async def create(self, request: Request, store: dict, kind: str) -> Response:
        body = await request.json()
        if kind == "Patient" and body.get("gender") not in (None, *GENDERS):
            return outcome(422, "code-invalid", f"Unknown gender {body['gender']!r}", "Patient.gender")
        condition = request.headers.get("if-none-exist")
        if condition:
            key, _, wanted = condition.partition("=")
            for resource in store.values():
                if key == "identifier" and any(
                    f"{i.get('system')}|{i.get('value')}" == wanted for i in resource.get("identifier", [])
                ):
                    return JSONResponse(resource, status_code=200, media_type=FHIR_JSON)
        resource = {**body, "id": f"s{next(self._ids)}", "meta": {"versionId": "1"}}
        store[(kind, resource["id"])] = resource
        return JSONResponse(
            resource,
            status_code=201,
            media_type=FHIR_JSON,
            headers={"Location": f"{ADVERTISED_ORIGIN}/{kind}/{resource['id']}/_history/1"},
        )

    def search(self, request: Request, store: dict, prefix: str, kind: str) -> Response:
        query = request.query_params
        matches = [r for (k, _), r in sorted(store.items()) if k == kind]
        if "family" in query:
            matches = [r for r in matches if any(n.get("family") == query["family"] for n in r.get("name", []))]
        count = int(query.get("_count", "2"))
        page = int(query.get("_page", "1"))
        chunk = matches[(page - 1) * count : page * count]
        kept = [(k, v) for k, v in query.multi_items() if k != "_page"]

        def link(page_number: int) -> str:
            return f"{ADVERTISED_ORIGIN}{prefix}/{kind}?{urlencode([*kept, ('_page', page_number)])}"

        links = [{"relation": "self", "url": link(page)}]
        if page * count < len(matches):
            links.append({"relation": "next", "url": link(page + 1)})
        bundle = {
            "resourceType": "Bundle",
            "type": "searchset",
            "total": len(matches),
            "link": links,
            "entry": [
                {
                    "fullUrl": f"{ADVERTISED_ORIGIN}{prefix}/{kind}/{r['id']}",
                    "resource": r,
                    "search": {"mode": "match"},
                }
                for r in chunk
            ],
        }
        return JSONResponse(bundle, media_type=FHIR_JSON)

    async def instance(self, request: Request, store: dict, prefix: str, kind: str, rid: str) -> Response:
        key = (kind, rid)
        if request.method == "GET":
            if (prefix, kind, rid) in self.deleted:
                return outcome(410, "deleted", f"{kind}/{rid} was deleted")
            if key not in store:
                return outcome(404, "not-found", f"{kind}/{rid} is not known")
            return JSONResponse(store[key], media_type=FHIR_JSON)
        if request.method == "DELETE":
            if key not in store:
                return outcome(404, "not-found", f"{kind}/{rid} is not known")
            del store[key]
            self.deleted.add((prefix, kind, rid))
            return Response(status_code=204)
        if request.method == "PUT":
            body = await request.json()
            if body.get("id") != rid:
                return outcome(400, "invalid", "body id does not match the URL", f"{kind}.id")
            current = store.get(key)
            version = int(current["meta"]["versionId"]) if current else 0
            wanted = request.headers.get("if-match")
            if wanted and wanted != f'W/"{version}"':
                return outcome(412, "conflict", f"version is {version}, not {wanted}")
            resource = {**body, "meta": {"versionId": str(version + 1)}}
            store[key] = resource
            return JSONResponse(resource, status_code=200 if current else 201, media_type=FHIR_JSON)
        return outcome(405, "not-supported", "method not allowed")


@contextmanager
def serve(app: Any) -> Iterator[str]:
    """Serve an ASGI app with uvicorn on an ephemeral 127.0.0.1 port; yields its origin."""
    # IPPROTO_TCP given outright: asyncio sets TCP_NODELAY only on sockets whose proto says TCP,
    # and without it every response waits ~40 ms on delayed ACKs.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="auto"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def closed_port() -> int:
    """A 127.0.0.1 port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
