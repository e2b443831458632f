"""The FHIR MCP server against the embedded FHIR server, reached through a path-rewriting proxy.

The proxy here stands in for the recording proxy's routing only (``/run/{run}/{actor}/fhir`` to
the run's sandbox): the embedded server writes paging links with its own address, so following
them through the proxy is what a recorded run does.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from fhir_standin import serve
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fae.agents.mcp_client import McpToolbox
from fae.fhir.app import create_app
from fae.mcp.fhir_server import fhir_mcp_http_app

pytestmark = pytest.mark.anyio

HOP_HEADERS = {"content-length", "content-encoding", "transfer-encoding", "connection"}


def routing_proxy(upstream: str, seen: list[tuple[str, str, str]]) -> Starlette:
    """Forward ``/run/{run}/{actor}/fhir/...`` to ``{upstream}/sandbox/{run}/fhir/...``, noting each request."""

    async def forward(request: Request) -> Response:
        run, actor = request.path_params["run"], request.path_params["actor"]
        rest = request.path_params.get("rest", "")
        target = f"{upstream}/sandbox/{run}/fhir/{rest}".rstrip("/")
        seen.append((actor, request.method, f"{rest}?{request.url.query}" if request.url.query else rest))
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_HEADERS | {"host"}}
        async with httpx.AsyncClient() as client:
            answer = await client.request(
                request.method,
                target,
                params=request.query_params.multi_items(),
                content=await request.body(),
                headers=headers,
            )
        kept = {k: v for k, v in answer.headers.items() if k.lower() not in HOP_HEADERS}
        return Response(answer.content, status_code=answer.status_code, headers=kept)

    methods = ["GET", "POST", "PUT", "DELETE"]
    return Starlette(
        routes=[
            Route("/run/{run}/{actor}/fhir", forward, methods=methods),
            Route("/run/{run}/{actor}/fhir/{rest:path}", forward, methods=methods),
        ]
    )


@pytest.fixture(scope="module")
def stack() -> Iterator[tuple[str, str, list]]:
    """Embedded FHIR server, routing proxy in front, FHIR MCP server using the proxy per run."""
    seen: list[tuple[str, str, str]] = []
    with (
        serve(create_app()) as fhir_origin,
        serve(routing_proxy(fhir_origin, seen)) as proxy_origin,
    ):
        app = fhir_mcp_http_app(f"{proxy_origin}/run/{{run}}/{{actor}}/fhir")
        with serve(app) as mcp_origin:
            yield f"{mcp_origin}/mcp", fhir_origin, seen


async def new_sandbox(fhir_origin: str, run: str) -> None:
    async with httpx.AsyncClient() as client:
        answer = await client.post(f"{fhir_origin}/sandbox", params={"id": run})
        assert answer.status_code == 201


async def test_crud_and_errors_on_the_embedded_server(stack):
    mcp_url, fhir_origin, seen = stack
    await new_sandbox(fhir_origin, "emb1")
    async with McpToolbox(mcp_url, {"X-Fae-Run": "emb1", "X-Fae-Actor": "agent"}) as box:
        created = await box.call_tool(
            "createResource",
            {"resourceType": "Patient", "body_json": {"name": [{"family": "Okafor"}]}},
        )
        pid = created.result["id"]
        updated = await box.call_tool(
            "updateResource",
            {
                "resourceType": "Patient",
                "resourceId": pid,
                "body_json": {"gender": "female"},
                "ifMatchVersion": "1",
            },
        )
        stale = await box.call_tool(
            "updateResource",
            {
                "resourceType": "Patient",
                "resourceId": pid,
                "body_json": {"gender": "male"},
                "ifMatchVersion": "1",
            },
        )
        invalid = await box.call_tool("createResource", {"resourceType": "Patient", "body_json": {"gender": "robot"}})
        deleted = await box.call_tool("deleteResource", {"resourceType": "Patient", "resourceId": pid})
        gone = await box.call_tool("getResourceById", {"resourceType": "Patient", "resourceId": pid})
    assert not created.is_error and updated.result["meta"]["versionId"] == "2"
    assert stale.is_error and stale.result["status"] == 412 and stale.result["issue_codes"] == ["conflict"]
    assert invalid.is_error and invalid.result["status"] == 422
    assert invalid.result["first_expression"] == "Patient.gender"
    assert deleted.result["deleted"] is True
    assert gone.is_error and gone.result["status"] == 410
    assert {actor for actor, _, _ in seen} == {"agent"}


async def test_paging_follows_the_servers_links_through_the_proxy(stack):
    mcp_url, fhir_origin, seen = stack
    await new_sandbox(fhir_origin, "emb2")
    async with McpToolbox(mcp_url, {"X-Fae-Run": "emb2", "X-Fae-Actor": "agent"}) as box:
        for family in "ABCDE":
            await box.call_tool(
                "createResource",
                {"resourceType": "Patient", "body_json": {"name": [{"family": family}]}},
            )
        start = len(seen)
        everything = await box.call_tool("searchResources", {"resourceType": "Patient", "params_json": {"count": 2}})
        limited = await box.call_tool(
            "searchResources",
            {"resourceType": "Patient", "params_json": {"count": 2}, "page_limit": 2},
        )
    assert len(everything.result["entry"]) == 5
    assert len(limited.result["entry"]) == 4
    # Every page, including those the server linked on its own address, went through the proxy.
    searches = [path for _, method, path in seen[start:] if method == "GET"]
    assert len(searches) == 3 + 2
    assert all(path.startswith("Patient?") for path in searches)
