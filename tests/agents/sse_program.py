"""A program agent that lists the FHIR MCP server's tools over the legacy SSE transport (FAE_MCP_SSE_URL)."""

import asyncio
import os

from mcp import Client
from mcp.client.sse import sse_client


async def main() -> None:
    async with Client(sse_client(os.environ["FAE_MCP_SSE_URL"])) as client:
        listing = await client.list_tools()
    print(" ".join(sorted(tool.name for tool in listing.tools)))


asyncio.run(main())
