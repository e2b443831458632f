"""A small adapter over the official MCP client: list tools, call them, get ``ToolOutcome``s.

We stay on mcp 2 (``langchain-mcp-adapters`` pins ``mcp<2``), so agents reach
MCP servers through this adapter: ``McpToolbox`` connects over streamable HTTP,
legacy HTTP+SSE (a URL whose path ends in ``/sse``) or stdio, lists tools with
their JSON input schemas (enough for OpenAI tool definitions), and turns each
tool result into the ``ToolOutcome`` a scripted agent's ``run_plan`` consumes.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from types import TracebackType
from typing import Any, Self
from urllib.parse import urlsplit

import httpx2
import msgspec
from mcp import Client, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, TextContent

from fae.agents.plan_runner import CallTool, ToolOutcome
from fae.util.json_text import json_or_text
from fae.util.tls import client_tls


class ToolSpec(msgspec.Struct, frozen=True):
    """One tool a server offers: its name, description and JSON Schema for arguments."""

    name: str
    description: str
    input_schema: dict[str, Any]

    def openai_tool(self) -> dict[str, Any]:
        """This tool as an OpenAI chat-completions tool definition."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.input_schema,
            },
        }


def outcome_of(result: CallToolResult) -> ToolOutcome:
    """The ``ToolOutcome`` of an MCP tool result: its JSON where it has one, else its text."""
    texts = [block.text for block in result.content if isinstance(block, TextContent)]
    value: Any
    if len(texts) == 1:
        value = json_or_text(texts[0])
        if isinstance(value, str) and result.structured_content is not None:
            value = result.structured_content
    elif result.structured_content is not None:
        value = result.structured_content
    elif texts:
        value = [json_or_text(text) for text in texts]
    else:
        value = None
    return ToolOutcome(result=value, is_error=bool(result.is_error))


def _first_cause(exc: BaseException) -> str:
    """The innermost useful message of an exception (task groups wrap transport failures)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"


class McpToolbox:
    """The tools of one MCP server, used inside ``async with``.

    ``url`` is a streamable-HTTP endpoint (``http://host:port/mcp``), or a legacy
    SSE one when its path ends in ``/sse``; ``headers`` go on every HTTP request.
    ``McpToolbox.stdio(params)`` launches a server process instead. A server that
    cannot be reached raises ``ConnectionError`` on entry; a failing tool never raises (see ``call_tool``).
    """

    def __init__(
        self,
        url: str,
        headers: dict[str, str] | None = None,
        *,
        read_timeout_s: float | None = 120.0,
    ) -> None:
        self.url = url
        self.headers = dict(headers or {})
        self.read_timeout_s = read_timeout_s
        self._stdio: StdioServerParameters | None = None
        self._stack: AsyncExitStack | None = None
        self._client: Client | None = None

    @classmethod
    def stdio(cls, params: StdioServerParameters, *, read_timeout_s: float | None = 120.0) -> Self:
        """A toolbox over a server process spoken to on stdin/stdout."""
        box = cls(f"stdio:{params.command}", read_timeout_s=read_timeout_s)
        box._stdio = params
        return box

    async def __aenter__(self) -> Self:
        async with AsyncExitStack() as stack:
            if self._stdio is not None:
                target: Any = self._stdio
            elif urlsplit(self.url).path.rstrip("/").endswith("/sse"):
                # The legacy transport holds one event stream open for the session; it is idle while a tool runs.
                target = sse_client(
                    self.url, headers=self.headers, timeout=30.0, sse_read_timeout=self.read_timeout_s or 300.0
                )
            else:
                # The SDK's transport speaks httpx2; a server may hold a read open while a tool runs.
                timeout = httpx2.Timeout(30.0, read=self.read_timeout_s)
                http_client = await stack.enter_async_context(
                    httpx2.AsyncClient(headers=self.headers, timeout=timeout, verify=client_tls())
                )
                target = streamable_http_client(self.url, http_client=http_client)
            # The response cache is off: a tool listing must reflect the server as it is now.
            client = Client(target, read_timeout_seconds=self.read_timeout_s, cache=None)
            try:
                self._client = await stack.enter_async_context(client)
            except Exception as exc:
                raise ConnectionError(f"cannot reach MCP server {self.url}: {_first_cause(exc)}") from exc
            self._stack = stack.pop_all()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        stack, self._stack, self._client = self._stack, None, None
        if stack is not None:
            await stack.__aexit__(exc_type, exc, traceback)

    @property
    def client(self) -> Client:
        if self._client is None:
            raise RuntimeError("McpToolbox is used outside 'async with'")
        return self._client

    async def list_tools(self) -> list[ToolSpec]:
        """Every tool the server offers, following the listing's pages."""
        specs: list[ToolSpec] = []
        cursor: str | None = None
        while True:
            listing = await self.client.list_tools(cursor=cursor)
            specs.extend(
                ToolSpec(
                    name=tool.name,
                    description=tool.description or "",
                    input_schema=dict(tool.input_schema),
                )
                for tool in listing.tools
            )
            cursor = listing.next_cursor
            if not cursor:
                return specs

    async def call_tool(self, name: str, args: dict[str, Any]) -> ToolOutcome:
        """Call one tool; a tool failure or a protocol error comes back as ``is_error``, not raised."""
        try:
            result = await self.client.call_tool(name, args)
        except MCPError as exc:
            error = {"error": "MCP_ERROR", "code": exc.error.code, "diagnostics": exc.error.message}
            return ToolOutcome(result=error, is_error=True)
        return outcome_of(result)


def toolbox_call(box: McpToolbox) -> CallTool:
    """The ``CallTool`` that ``fae.agents.plan_runner.run_plan`` takes, calling through ``box``."""

    async def call(name: str, args: dict[str, Any]) -> ToolOutcome:
        return await box.call_tool(name, args)

    return call
