"""A real HTTP upstream for proxy tests: answers the awkward shapes a proxy must carry."""

from __future__ import annotations

import asyncio
import gzip
import json

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

BIG = bytes(range(256)) * (5 * 1024 * 1024 // 256)


async def echo(request: Request) -> Response:
    body = await request.body()
    payload = {
        "method": request.method,
        "path": request.url.path,
        "query": request.url.query,
        "headers": dict(request.headers),
        "body": body.decode("utf-8", "replace"),
    }
    return Response(json.dumps(payload), media_type="application/json")


async def gzipped(request: Request) -> Response:
    return Response(
        gzip.compress(b'{"ok": true, "gzip": "yes"}'),
        media_type="application/json",
        headers={"content-encoding": "gzip"},
    )


async def mislabelled(request: Request) -> Response:
    return Response(b'{"not": "gzip at all"}', media_type="application/json", headers={"content-encoding": "gzip"})


async def big(request: Request) -> Response:
    return Response(BIG, media_type="application/octet-stream")


async def big_chunked(request: Request) -> StreamingResponse:
    """BIG with no Content-Length (chunked), as servers send what they make as they go; ``?size=N``: N bytes."""
    size = int(request.query_params.get("size", len(BIG)))

    async def pieces():
        for start in range(0, size, 64 * 1024):
            yield BIG[start % len(BIG) :][: min(64 * 1024, size - start)]

    return StreamingResponse(pieces(), media_type="application/octet-stream")


async def sse(request: Request) -> StreamingResponse:
    async def events():
        for i in range(5):
            yield f"data: {json.dumps({'n': i})}\n\n".encode()
            await asyncio.sleep(0.01)
        yield b"data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")


async def error_page(request: Request) -> Response:
    return Response("<html><body>502 Bad Gateway from nginx</body></html>", status_code=502, media_type="text/html")


async def chat(request: Request) -> Response:
    """An OpenAI-shaped answer that does not echo what it was sent; keeps the headers it saw."""
    request.app.state.seen_headers.append(dict(request.headers))
    return Response(
        json.dumps(
            {
                "id": "c1",
                "model": "m",
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
            }
        ),
        media_type="application/json",
    )


def create_upstream() -> Starlette:
    app = Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/gzip", gzipped),
            Route("/mislabelled", mislabelled),
            Route("/big", big),
            Route("/big-chunked", big_chunked),
            Route("/sse", sse),
            Route("/error-page", error_page),
            Route("/{path:path}", echo, methods=["GET", "POST", "PUT", "DELETE", "PATCH"]),
        ]
    )
    app.state.seen_headers = []
    return app
