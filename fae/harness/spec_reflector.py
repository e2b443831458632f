"""The specs MCP server's tools for the spec-grounded reflector, through the URL the harness gives
(the recording proxy's, so each call the reflector makes is in the log)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fae.agents.mcp_client import McpToolbox
from fae.memory.spec_tools import SpecTools


@asynccontextmanager
async def spec_tools(specs_mcp_url: str) -> AsyncIterator[SpecTools]:
    """The server's tools as chat tool definitions, and a call that plays one on the server."""
    async with McpToolbox(specs_mcp_url) as box:
        listed = await box.list_tools()

        async def call(name: str, args: dict[str, Any]) -> tuple[Any, bool]:
            outcome = await box.call_tool(name, args)
            return outcome.result, outcome.is_error

        yield SpecTools(tuple(tool.openai_tool() for tool in listed), call)
