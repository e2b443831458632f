"""``--agent desk``: reads the name and birth date from the prompt and searches for them over MCP."""

from __future__ import annotations

import json
import re
from typing import Any

from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from fae import AgentContext, AgentResult

ASKED = re.compile(r"they are (\S+) (\S+), born (\d{4}-\d{2}-\d{2})")


class DeskAgent:
    name = "desk"

    def config(self) -> dict[str, Any]:
        return {"kind": "plugin", "name": self.name}

    async def run(self, ctx: AgentContext) -> AgentResult:
        found = ASKED.search(ctx.prompt)
        if found is None:
            return AgentResult(answer=None, stop_reason="gave_up")
        given, family, born = found.groups()
        async with Client(streamable_http_client(ctx.mcp_url)) as client:
            result = await client.call_tool(
                "searchResources",
                {"resourceType": "Patient", "params_json": {"family": family, "given": given, "birthdate": born}},
            )
        bundle = json.loads(result.content[0].text)
        entries = bundle.get("entry") or []
        answer = entries[0]["resource"]["id"] if entries else "NONE"
        return AgentResult(answer=f"<PATIENT>{answer}</PATIENT>")


def build(spec: str, **llm_options: Any) -> DeskAgent:
    return DeskAgent()
