"""The FHIR CRUD MCP server: the tools of ``fhir_tools`` served over MCP.

The FHIR base is fixed, or a template holding ``{run}`` (and optionally
``{actor}`` and ``{capability}``) that each tool call fills from the
``X-Fae-Run`` / ``X-Fae-Actor`` / ``X-Fae-Capability`` headers of the HTTP
request it came in on: the recording proxy adds them, so
one MCP server serves every run, and each run's FHIR traffic goes to its own
sandbox through the proxy. A callable base gets the request headers and returns
the base. Over stdio there are no headers, so a template base answers with an
error result.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import httpx
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, TextContent
from starlette.applications import Starlette

from fae.mcp import fhir_tools
from fae.mcp.fhir_tools import Result, is_error_result
from fae.mcp.transports import http_app
from fae.util.tls import client_tls

RUN_HEADER = "X-Fae-Run"
ACTOR_HEADER = "X-Fae-Actor"
CAPABILITY_HEADER = "X-Fae-Capability"
SERVER_NAME = "fhir"
DEFAULT_TIMEOUT_S = 30.0

BaseSource = str | Callable[[Mapping[str, str]], str]
"""A FHIR base URL, a template with ``{run}``/``{actor}``, or a function of the request headers."""

_HEADER_VALUE = re.compile(r"[A-Za-z0-9_.\-]{1,128}")
_PLACEHOLDERS = {"{run}": RUN_HEADER, "{actor}": ACTOR_HEADER, "{capability}": CAPABILITY_HEADER}


class BaseUnavailable(Exception):
    """The FHIR base for this call cannot be worked out from the request."""


def resolve_base(source: BaseSource, headers: Mapping[str, str]) -> str:
    """The FHIR base for one tool call, from the configured source and the request headers."""
    if callable(source):
        try:
            return source(headers)
        except (KeyError, ValueError) as exc:
            raise BaseUnavailable(f"cannot choose a FHIR base for this request: {exc}") from None
    base = source
    lowered = {key.lower(): value for key, value in headers.items()}
    for placeholder, header in _PLACEHOLDERS.items():
        if placeholder not in base:
            continue
        value = lowered.get(header.lower())
        if not value:
            raise BaseUnavailable(f"the FHIR base {source!r} needs the {header} header, and this request has none")
        if not _HEADER_VALUE.fullmatch(value):
            raise BaseUnavailable(f"the {header} header {value!r} is not a plain identifier")
        base = base.replace(placeholder, value)
    return base


def _request_headers(ctx: Context) -> Mapping[str, str]:
    """Headers of the HTTP request a tool call came in on; empty over stdio."""
    request = ctx.request_context.request
    headers = getattr(request, "headers", None)
    return headers if headers is not None else {}


def tool_result(result: Result) -> CallToolResult:
    """An MCP tool result carrying ``result`` as JSON text and structured content.

    An error dict is still data an agent reads, and it is flagged ``isError`` so
    a client and the recorder can tell a failed call at a glance.
    """
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(result, ensure_ascii=False))],
        structured_content=result,
        is_error=is_error_result(result),
    )


def build_fhir_mcp(fhir_base: BaseSource, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> MCPServer:
    """An MCP server named ``fhir`` whose tools act on the FHIR server at ``fhir_base``."""

    async def call(ctx: Context, tool: Callable[..., Awaitable[Result]], *args: Any) -> CallToolResult:
        try:
            base = resolve_base(fhir_base, _request_headers(ctx))
        except BaseUnavailable as exc:
            return tool_result({"error": "FHIR_BASE_UNAVAILABLE", "diagnostics": str(exc)})
        # One client per call: the base may differ per run, and a call is a handful of requests.
        async with httpx.AsyncClient(base_url=base, timeout=timeout_s, verify=client_tls()) as client:
            return tool_result(await tool(client, *args))

    async def createResource(
        ctx: Context,
        resourceType: str,
        body_json: dict[str, Any] | str,
        ifNoneExist: str | None = None,
    ) -> CallToolResult:
        return await call(ctx, fhir_tools.createResource, resourceType, body_json, ifNoneExist)

    async def searchResources(
        ctx: Context,
        resourceType: str,
        params_json: dict[str, Any] | str | None = None,
        all_pages: bool = True,
        page_limit: int | None = None,
    ) -> CallToolResult:
        return await call(ctx, fhir_tools.searchResources, resourceType, params_json, all_pages, page_limit)

    async def getResourceById(ctx: Context, resourceType: str, resourceId: str) -> CallToolResult:
        return await call(ctx, fhir_tools.getResourceById, resourceType, resourceId)

    async def updateResource(
        ctx: Context,
        resourceType: str,
        resourceId: str,
        body_json: dict[str, Any] | str,
        ifMatchVersion: str | None = None,
    ) -> CallToolResult:
        return await call(ctx, fhir_tools.updateResource, resourceType, resourceId, body_json, ifMatchVersion)

    async def deleteResource(ctx: Context, resourceType: str, resourceId: str) -> CallToolResult:
        return await call(ctx, fhir_tools.deleteResource, resourceType, resourceId)

    async def listResourceTypes(ctx: Context) -> CallToolResult:
        return await call(ctx, fhir_tools.listResourceTypes)

    server = MCPServer(
        SERVER_NAME,
        # The SDK configures root logging at this level; INFO would log every FHIR request.
        log_level="WARNING",
        instructions=(
            "Tools that create, search, read, update and delete FHIR R4 resources. A failed call "
            "returns an object with an 'error' field and the server's diagnostics; read it and retry."
        ),
    )
    for wrapper in (
        createResource,
        searchResources,
        getResourceById,
        updateResource,
        deleteResource,
        listResourceTypes,
    ):
        documented = getattr(fhir_tools, wrapper.__name__)
        server.add_tool(wrapper, description=inspect.cleandoc(documented.__doc__ or ""))
    return server


def fhir_mcp_http_app(fhir_base: BaseSource, *, path: str = "/mcp", timeout_s: float = DEFAULT_TIMEOUT_S) -> Starlette:
    """The FHIR MCP server over stateless streamable HTTP at ``path`` and legacy SSE at /sse (see transports)."""
    return http_app(build_fhir_mcp(fhir_base, timeout_s=timeout_s), path=path)
