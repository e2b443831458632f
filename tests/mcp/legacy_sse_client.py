"""Run by the transport tests under an ``mcp<2`` interpreter: one SSE session, its tools and some calls.

Usage: python legacy_sse_client.py SSE_URL CALLS_JSON, where CALLS_JSON is a list of [tool, arguments].
Prints one JSON object: the tool names and, per call, isError and the parsed text result.
"""

import asyncio
import json
import sys

import mcp
from mcp import ClientSession
from mcp.client.sse import sse_client


async def main(url: str, calls: list) -> None:
    async with sse_client(url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = await session.list_tools()
        results = []
        for name, arguments in calls:
            result = await session.call_tool(name, arguments)
            text = "".join(c.text for c in result.content if c.type == "text")
            results.append({"isError": result.isError, "result": json.loads(text)})
    print(json.dumps({"sdk": mcp.__name__, "tools": sorted(t.name for t in tools.tools), "calls": results}))


asyncio.run(main(sys.argv[1], json.loads(sys.argv[2])))
