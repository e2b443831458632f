"""MCP tools as LangChain tools, over our own ``McpToolbox`` (mcp 2).

``langchain-mcp-adapters`` pins ``mcp<2``; fae stays on the mcp 2 SDK that its
servers are built with, so this module does the small part of that package we
need: each MCP tool becomes a ``StructuredTool`` whose arguments are the
server's JSON Schema and whose call goes through the toolbox. The tool answers
with the result as JSON text (what the model reads) and the ``ToolOutcome`` as
its artifact (so the loop can tell a failed call without parsing text).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool

from fae.agents.mcp_client import McpToolbox, ToolSpec
from fae.agents.plan_runner import ToolOutcome
from fae.errors import FaeError


def outcome_text(outcome: ToolOutcome) -> str:
    """What the model reads of a tool result: its JSON, or its text as is."""
    if isinstance(outcome.result, str):
        return outcome.result
    return json.dumps(outcome.result, ensure_ascii=False, separators=(",", ":"))


def langchain_tool(box: McpToolbox, spec: ToolSpec, *, server: str) -> BaseTool:
    """One MCP tool of ``box`` as a LangChain tool answering ``(text, ToolOutcome)``."""

    async def call(**arguments: Any) -> tuple[str, ToolOutcome]:
        outcome = await box.call_tool(spec.name, arguments)
        return outcome_text(outcome), outcome

    return StructuredTool(
        name=spec.name,
        description=spec.description or f"The {spec.name} tool of the {server} MCP server.",
        args_schema=spec.input_schema,
        coroutine=call,
        response_format="content_and_artifact",
        metadata={"mcp_server": server},
    )


async def langchain_tools(boxes: Mapping[str, McpToolbox]) -> dict[str, BaseTool]:
    """Every tool of every server (server name → open toolbox), by tool name; a name clash is an error."""
    tools: dict[str, BaseTool] = {}
    owner: dict[str, str] = {}
    for server, box in boxes.items():
        for spec in await box.list_tools():
            if spec.name in tools:
                raise FaeError(
                    f"MCP tool {spec.name!r} is offered by both {owner[spec.name]} and {server}; "
                    "an agent needs one name per tool"
                )
            tools[spec.name] = langchain_tool(box, spec, server=server)
            owner[spec.name] = server
    return tools
