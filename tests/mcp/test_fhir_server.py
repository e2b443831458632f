"""The FHIR MCP server over streamable HTTP (and stdio), driven by the SDK client through McpToolbox."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator

import pytest
from fhir_standin import closed_port, serve
from mcp import StdioServerParameters

from fae.agents.mcp_client import McpToolbox
from fae.agents.prefixes import FHIR_MCP_TOOLS
from fae.mcp.fhir_server import BaseUnavailable, fhir_mcp_http_app, resolve_base

pytestmark = pytest.mark.anyio

TOOLS = set(FHIR_MCP_TOOLS)
"""What the server offers is what a plan agent's plan is checked against before recording."""


@pytest.fixture(scope="module")
def mcp_url(standin) -> Iterator[str]:
    """The MCP endpoint of a server whose FHIR base is a per-run template on the stand-in."""
    origin, _ = standin
    with serve(fhir_mcp_http_app(f"{origin}/runs/{{run}}/fhir")) as mcp_origin:
        yield f"{mcp_origin}/mcp"


def run_headers(run: str | None = None) -> dict[str, str]:
    return {"X-Fae-Run": run or uuid.uuid4().hex[:10], "X-Fae-Actor": "agent"}


async def test_lists_the_tools_with_descriptions_and_schemas(mcp_url):
    async with McpToolbox(mcp_url) as box:
        tools = {tool.name: tool for tool in await box.list_tools()}
    assert set(tools) == TOOLS
    create = tools["createResource"]
    assert "POST [base]/{resourceType}" in create.description and "ifNoneExist" in create.description
    assert set(create.input_schema["required"]) == {"resourceType", "body_json"}
    assert "ctx" not in create.input_schema["properties"]
    assert create.openai_tool()["function"]["parameters"] == create.input_schema


async def test_crud_through_mcp(mcp_url, standin):
    _, fhir = standin
    headers = run_headers()
    async with McpToolbox(mcp_url, headers) as box:
        created = await box.call_tool("createResource", {"resourceType": "Patient", "body_json": {"gender": "male"}})
        assert not created.is_error and created.result["id"]
        pid = created.result["id"]
        read = await box.call_tool("getResourceById", {"resourceType": "Patient", "resourceId": pid})
        assert read.result == created.result
        updated = await box.call_tool(
            "updateResource",
            {
                "resourceType": "Patient",
                "resourceId": pid,
                "body_json": '{"gender": "female"}',
                "ifMatchVersion": "1",
            },
        )
        assert (updated.result["gender"], updated.result["meta"]["versionId"]) == ("female", "2")
        found = await box.call_tool("searchResources", {"resourceType": "Patient", "params_json": {"count": 1}})
        assert [e["resource"]["id"] for e in found.result["entry"]] == [pid]
        deleted = await box.call_tool("deleteResource", {"resourceType": "Patient", "resourceId": pid})
        assert deleted.result["deleted"] is True and not deleted.is_error
        types = await box.call_tool("listResourceTypes", {})
        assert "Patient" in types.result["resourceTypes"]
    # Every FHIR request went to this run's base, filled from X-Fae-Run.
    mine = [r for r in fhir.requests if r["prefix"] == f"/runs/{headers['X-Fae-Run']}/fhir"]
    assert [r["method"] for r in mine] == ["POST", "GET", "PUT", "GET", "DELETE", "GET"]


async def test_each_run_gets_its_own_base(mcp_url):
    async with (
        McpToolbox(mcp_url, run_headers("run-a")) as box_a,
        McpToolbox(mcp_url, run_headers("run-b")) as box_b,
    ):
        await box_a.call_tool("createResource", {"resourceType": "Patient", "body_json": {}})
        in_a = await box_a.call_tool("searchResources", {"resourceType": "Patient"})
        in_b = await box_b.call_tool("searchResources", {"resourceType": "Patient"})
    assert in_a.result["total"] >= 1
    assert in_b.result["total"] == 0


async def test_fhir_errors_come_back_as_data_flagged_is_error(mcp_url):
    async with McpToolbox(mcp_url, run_headers()) as box:
        bad = await box.call_tool("createResource", {"resourceType": "Patient", "body_json": {"gender": "robot"}})
        missing = await box.call_tool("getResourceById", {"resourceType": "Patient", "resourceId": "nope"})
        unknown = await box.call_tool("searchResources", {"resourceType": "Spaceship"})
    assert bad.is_error and bad.result["error"] == "OPERATION_OUTCOME" and bad.result["status"] == 422
    assert bad.result["first_expression"] == "Patient.gender"
    assert missing.is_error and missing.result["status"] == 404
    # a type R4 does not have is refused before any request, as every argument that becomes part of a URL
    assert unknown.is_error and unknown.result["error"] == "INVALID_ARGUMENT", unknown.result
    assert unknown.result["argument"] == "resourceType"


async def test_bad_json_arguments_come_back_as_errors(mcp_url):
    async with McpToolbox(mcp_url, run_headers()) as box:
        not_json = await box.call_tool("createResource", {"resourceType": "Patient", "body_json": "{nope"})
        wrong_shape = await box.call_tool("createResource", {"resourceType": "Patient", "body_json": "[1, 2]"})
        missing = await box.call_tool("getResourceById", {"resourceType": "Patient"})
    assert not_json.is_error and not_json.result["error"] == "INVALID_ARGUMENT"
    assert not_json.result["argument"] == "body_json"
    # The SDK refuses arguments that fit no declared type before the tool runs, still as a tool error.
    assert wrong_shape.is_error and "body_json" in str(wrong_shape.result)
    assert missing.is_error and "resourceId" in str(missing.result)


async def test_paging_through_mcp_stops_at_page_limit(mcp_url):
    async with McpToolbox(mcp_url, run_headers()) as box:
        for family in "ABCDE":
            await box.call_tool(
                "createResource",
                {"resourceType": "Patient", "body_json": {"name": [{"family": family}]}},
            )
        limited = await box.call_tool(
            "searchResources",
            {"resourceType": "Patient", "params_json": '{"count": 2}', "page_limit": 2},
        )
        everything = await box.call_tool("searchResources", {"resourceType": "Patient", "params_json": {"count": 2}})
    assert len(limited.result["entry"]) == 4
    assert len(everything.result["entry"]) == 5


async def test_missing_run_header_is_a_clear_error(mcp_url):
    async with McpToolbox(mcp_url) as box:
        outcome = await box.call_tool("getResourceById", {"resourceType": "Patient", "resourceId": "1"})
    assert outcome.is_error and outcome.result["error"] == "FHIR_BASE_UNAVAILABLE"
    assert "X-Fae-Run" in outcome.result["diagnostics"]


async def test_fhir_server_down_comes_back_as_data():
    with serve(fhir_mcp_http_app(f"http://127.0.0.1:{closed_port()}/fhir")) as origin:
        async with McpToolbox(f"{origin}/mcp") as box:
            outcome = await box.call_tool("getResourceById", {"resourceType": "Patient", "resourceId": "1"})
    assert outcome.is_error and outcome.result["error"] == "CONNECTION_ERROR"


async def test_callable_base_gets_the_request_headers(standin):
    origin, fhir = standin
    seen: list[str] = []

    def choose(headers) -> str:
        seen.append(headers["x-fae-actor"])
        return f"{origin}/by-actor/{headers['x-fae-actor']}/fhir"

    with serve(fhir_mcp_http_app(choose)) as mcp_origin:
        async with McpToolbox(f"{mcp_origin}/mcp", {"X-Fae-Actor": "verifier"}) as box:
            await box.call_tool("searchResources", {"resourceType": "Patient"})
        async with McpToolbox(f"{mcp_origin}/mcp") as box:
            refused = await box.call_tool("searchResources", {"resourceType": "Patient"})
    assert seen == ["verifier"]
    assert fhir.requests[-1]["prefix"] == "/by-actor/verifier/fhir"
    assert refused.is_error and refused.result["error"] == "FHIR_BASE_UNAVAILABLE"


def test_resolve_base_fills_and_checks_placeholders():
    headers = {"x-fae-run": "r1", "X-Fae-Actor": "agent"}
    assert resolve_base("http://p/run/{run}/{actor}/fhir", headers) == "http://p/run/r1/agent/fhir"
    assert resolve_base("http://fhir/base", {}) == "http://fhir/base"
    with pytest.raises(BaseUnavailable, match="X-Fae-Run"):
        resolve_base("http://p/run/{run}/fhir", {})
    with pytest.raises(BaseUnavailable, match="plain identifier"):
        resolve_base("http://p/run/{run}/fhir", {"X-Fae-Run": "../admin"})


async def test_stdio_transport(standin):
    origin, _ = standin
    base = f"{origin}/stdio/fhir"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "fae.mcp", "fhir", "--fhir-base", base, "--transport", "stdio"],
    )
    async with McpToolbox.stdio(params) as box:
        assert {tool.name for tool in await box.list_tools()} == TOOLS
        created = await box.call_tool("createResource", {"resourceType": "Patient", "body_json": {}})
        read = await box.call_tool("getResourceById", {"resourceType": "Patient", "resourceId": created.result["id"]})
    assert not read.is_error and read.result["id"] == created.result["id"]
