"""Any MCP client can drive fae's servers through the recording proxy, and its calls land in the log.

The client is the SDK's own streamable-HTTP client (``McpToolbox`` is a thin
wrapper over it); it is given the proxied URLs the harness hands to agents.
"""

from __future__ import annotations

import json

import httpx
import pytest

from fae.agents.mcp_client import McpToolbox
from fae.harness.stack import open_stack, sandbox_id
from fae.store.log import EventLog

pytestmark = pytest.mark.anyio

RUN = "external-client-1"


async def test_an_external_mcp_client_is_recorded(tmp_path):
    log_path = tmp_path / "external.duckdb"
    async with open_stack(log_path) as stack:
        empty = {"resourceType": "Bundle", "type": "transaction", "entry": []}
        async with httpx.AsyncClient() as client:
            seeded = await client.post(stack.fhir_root(RUN, "setup") + f"sandbox?id={sandbox_id(RUN)}", json=empty)
            assert seeded.status_code < 300, seeded.text
        patient = {"resourceType": "Patient", "name": [{"family": "Noether", "given": ["Emmy"]}]}
        async with McpToolbox(stack.mcp_url(RUN)) as fhir:
            tools = {tool.name for tool in await fhir.list_tools()}
            created = await fhir.call_tool("createResource", {"resourceType": "Patient", "body_json": patient})
            found = await fhir.call_tool(
                "searchResources", {"resourceType": "Patient", "params_json": {"family": "Noether"}}
            )
        async with McpToolbox(stack.extra_mcp(RUN)["specs"]) as specs:
            params = await specs.call_tool("getSearchParams", {"resourceType": "patient", "code": "family"})
    assert {"createResource", "searchResources", "getResourceById"} <= tools
    assert not created.is_error and created.result["id"]
    assert [e["resource"]["id"] for e in found.result["entry"]] == [created.result["id"]]
    assert params.result["searchParams"][0]["type"] == "string"

    with EventLog(log_path, read_only=True) as log:
        _, calls = log.query(
            "SELECT e.upstream, e.actor, t.tool, t.arguments, t.is_error FROM tool_calls t "
            "JOIN events e USING (run_id, seq) WHERE t.run_id = ? ORDER BY t.seq",
            [RUN],
        )
        _, fhir = log.query(
            "SELECT actor, interaction, resource_type, resource_id, status FROM fhir_exchanges "
            "WHERE run_id = ? AND actor = 'agent' ORDER BY seq",
            [RUN],
        )
    assert [(u, a, t, e) for u, a, t, _, e in calls] == [
        ("mcp-fhir", "agent", "createResource", False),
        ("mcp-fhir", "agent", "searchResources", False),
        ("mcp-specs", "agent", "getSearchParams", False),
    ]
    assert json.loads(calls[0][3])["body_json"]["name"][0]["family"] == "Noether"
    # the FHIR MCP server's own FHIR traffic went through the proxy too, attributed to the agent
    assert [(i, rt, s) for _, i, rt, _, s in fhir] == [("create", "Patient", 201), ("search-type", "Patient", 200)]
    assert fhir[0][3] == created.result["id"]
