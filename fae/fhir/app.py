"""ASGI (Starlette) app serving the engine: one FHIR base per sandbox plus admin endpoints.

    /fhir/...                        the default sandbox ("default")
    /sandbox/{id}/fhir/...           one sandbox's FHIR base
    POST   /sandbox[?id=ID]          create a sandbox, body = optional seed Bundle
    GET    /sandbox                  list sandbox ids
    POST   /sandbox/{id}/$reset      put a sandbox back to its seed
    POST   /sandbox/{id}/$clone[?id=NEW]  copy a sandbox
    DELETE /sandbox/{id}             drop a sandbox

Engine work (requests, seeding, reset, clone) runs in worker threads, so a slow
request never holds up the event loop that may also carry the recording proxy.
"""

from __future__ import annotations

import functools
import re

import anyio
import anyio.to_thread
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from fae.errors import FhirError
from fae.fhir.engine import FhirEngine
from fae.fhir.jsonbody import parse_json
from fae.fhir.outcome import FhirProblem, issue, outcome
from fae.fhir.types import Resource

DEFAULT_SANDBOX = "default"
ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]
FHIR_JSON = "application/fhir+json"


def _problem(status: int, message: str) -> JSONResponse:
    return JSONResponse(
        outcome(issue("error", "invalid" if status < 500 else "exception", message)),
        status_code=status,
        media_type=FHIR_JSON,
    )


async def _read_body(request: Request, limit: int) -> bytes | None:
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


_FORWARDED_HOST = re.compile(r"[A-Za-z0-9.\-]+(:\d{1,5})?|\[[0-9A-Fa-f:]+\](:\d{1,5})?")
_FORWARDED_PREFIX = re.compile(r"(/[A-Za-z0-9._\-]+)*")


def public_base(request: Request) -> str:
    """The server's root as its client sees it: behind a proxy that says so, the proxy's address.

    Honours X-Forwarded-Proto, X-Forwarded-Host and X-Forwarded-Prefix (as fae's recording
    proxy and most reverse proxies send them), so Location headers, fullUrls and paging links
    lead back through the proxy; malformed values are ignored.
    """
    host = request.headers.get("x-forwarded-host", "")
    if not host or not _FORWARDED_HOST.fullmatch(host):
        return str(request.base_url).rstrip("/")
    proto = request.headers.get("x-forwarded-proto", "http")
    proto = proto if proto in ("http", "https") else "http"
    prefix = request.headers.get("x-forwarded-prefix", "").rstrip("/")
    prefix = prefix if _FORWARDED_PREFIX.fullmatch(prefix) else ""
    return f"{proto}://{host}{prefix}"


def create_app(engine: FhirEngine | None = None, *, audit_events: bool = False) -> Starlette:
    """The server as an ASGI app; a default sandbox backs /fhir."""
    engine = engine or FhirEngine(audit_events=audit_events)
    if not engine.has_sandbox(DEFAULT_SANDBOX):
        engine.create_sandbox(sandbox_id=DEFAULT_SANDBOX)

    async def serve(request: Request, sid: str, base: str) -> Response:
        body = await _read_body(request, engine.max_body)
        if body is None:
            return _problem(413, f"Body larger than {engine.max_body} bytes")
        path = request.path_params.get("path", "")
        # engine work runs in a worker thread: a slow request must not stall the event loop
        # that may also carry the recording proxy and the log writer (`fae record`)
        resp = await anyio.to_thread.run_sync(
            functools.partial(
                engine.handle,
                sid,
                request.method,
                path,
                request.url.query,
                dict(request.headers),
                body or None,
                base_url=base,
            )
        )
        if request.method == "HEAD":
            return Response(b"", status_code=resp.status, headers=resp.headers)
        return Response(resp.body, status_code=resp.status, headers=resp.headers)

    def base_of(request: Request, suffix: str) -> str:
        return public_base(request) + suffix

    async def default_fhir(request: Request) -> Response:
        return await serve(request, DEFAULT_SANDBOX, base_of(request, "/fhir"))

    async def sandbox_fhir(request: Request) -> Response:
        sid = request.path_params["sid"]
        return await serve(request, sid, base_of(request, f"/sandbox/{sid}/fhir"))

    async def create(request: Request) -> Response:
        body = await _read_body(request, engine.max_body)
        if body is None:
            return _problem(413, f"Body larger than {engine.max_body} bytes")
        seed: Resource | None = None
        if body.strip():
            try:
                parsed = parse_json(body, "The seed")
            except FhirProblem as problem:
                return _problem(400, f"The seed must be a JSON FHIR Bundle: {problem}")
            if isinstance(parsed, dict):
                seed = parsed
            elif parsed is not None:
                return _problem(400, "a seed must be a FHIR Bundle")
        try:
            sid = await anyio.to_thread.run_sync(engine.create_sandbox, seed, request.query_params.get("id"))
        except FhirError as exc:
            return _problem(409 if "already exists" in str(exc) else 400, str(exc))
        return JSONResponse({"id": sid, "base": base_of(request, f"/sandbox/{sid}/fhir")}, status_code=201)

    async def listing(request: Request) -> Response:
        return JSONResponse({"sandboxes": engine.sandbox_ids()})

    async def admin(request: Request) -> Response:
        sid, action = request.path_params["sid"], request.path_params["action"]
        try:
            if action == "$reset":
                await anyio.to_thread.run_sync(engine.reset_sandbox, sid)
                return JSONResponse({"id": sid, "reset": True})
            if action == "$clone":
                new = await anyio.to_thread.run_sync(engine.clone_sandbox, sid, request.query_params.get("id"))
                return JSONResponse({"id": new, "base": base_of(request, f"/sandbox/{new}/fhir")}, status_code=201)
        except FhirError as exc:
            return _problem(404 if "no sandbox" in str(exc) else 409, str(exc))
        return _problem(404, f"Unknown sandbox action {action!r}")

    async def drop(request: Request) -> Response:
        try:
            engine.delete_sandbox(request.path_params["sid"])
        except FhirError as exc:
            return _problem(404, str(exc))
        return Response(status_code=204)

    routes = [
        Route("/fhir", default_fhir, methods=ALL_METHODS),
        Route("/fhir/{path:path}", default_fhir, methods=ALL_METHODS),
        Route("/sandbox", create, methods=["POST"]),
        Route("/sandbox", listing, methods=["GET"]),
        Route("/sandbox/{sid}", drop, methods=["DELETE"]),
        Route("/sandbox/{sid}/fhir", sandbox_fhir, methods=ALL_METHODS),
        Route("/sandbox/{sid}/fhir/{path:path}", sandbox_fhir, methods=ALL_METHODS),
        Route("/sandbox/{sid}/{action}", admin, methods=["POST"]),
    ]
    app = Starlette(routes=routes)
    app.state.engine = engine
    return app
