"""A program agent for fae on the official ``anthropic`` SDK, with FHIR tools through the MCP Python SDK.

Nothing in it knows fae beyond the environment it is given: the task on stdin, the FHIR MCP server at
``FAE_MCP_URL``, and the model behind ``ANTHROPIC_BASE_URL``, which the SDK reads by itself (as it reads
``ANTHROPIC_API_KEY``). It streams each model turn, calls the tools the model asks for, and prints the final
text on stdout; each turn's token usage, as the SDK read it, goes to stderr, which fae keeps in the run's log.

    fae record --task rec-create-patient --llm-url https://api.anthropic.com/v1 \\
        --model claude-sonnet-4-5 --agent 'cmd:python docs/examples/anthropic_agent.py'

Against fae's local scripted server, offline: ``fae llm serve`` and ``--llm-url http://127.0.0.1:8700/v1
--model scripted:gold`` (tests/agents/test_command_examples.py records it so).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

import anthropic
from mcp import Client

MAX_TURNS = 15
SYSTEM = (
    "You work on a FHIR R4 server through the tools given. Use them to do the task, "
    "then give the final answer in the answer tags the task asks for."
)


def tool_text(result: Any) -> str:
    """An MCP tool result as the text the model reads."""
    return "\n".join(block.text for block in result.content if getattr(block, "type", "") == "text")


async def main() -> int:
    prompt = sys.stdin.read()
    model = os.environ.get("FAE_MODEL", "claude-sonnet-4-5")
    llm = anthropic.AsyncAnthropic()
    async with Client(os.environ["FAE_MCP_URL"]) as mcp:
        listing = await mcp.list_tools()
        tools = [
            {"name": tool.name, "description": tool.description or "", "input_schema": tool.input_schema}
            for tool in listing.tools
        ]
        messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
        for _ in range(MAX_TURNS):
            async with llm.messages.stream(
                model=model, max_tokens=4096, system=SYSTEM, messages=messages, tools=tools
            ) as stream:
                reply = await stream.get_final_message()
            print(json.dumps({"usage": reply.usage.model_dump()}), file=sys.stderr)
            messages.append(
                {"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in reply.content]}
            )
            calls = [block for block in reply.content if block.type == "tool_use"]
            if not calls:
                print("".join(block.text for block in reply.content if block.type == "text"))
                return 0
            results = []
            for call in calls:
                result = await mcp.call_tool(call.name, call.input)
                results.append(
                    {
                        "type": "tool_result",
                        "tool_use_id": call.id,
                        "content": tool_text(result),
                        "is_error": bool(result.is_error),
                    }
                )
            messages.append({"role": "user", "content": results})
    print(f"no answer after {MAX_TURNS} model turns", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
