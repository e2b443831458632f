"""McpToolbox over the FHIR MCP server on real HTTP, and a scripted plan played through it."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp.types import CallToolResult, ImageContent, TextContent

from fae.agents.mcp_client import McpToolbox, outcome_of, toolbox_call
from fae.agents.plan_runner import run_plan
from fae.mcp.fhir_server import fhir_mcp_http_app
from fae.plan import plan_from_dict

pytestmark = pytest.mark.anyio


def _load_standin():
    """The FHIR stand-in of tests/mcp, loaded by path (tests/ holds no packages)."""
    name = "fae_tests_fhir_standin"
    if name not in sys.modules:
        path = Path(__file__).resolve().parent.parent / "mcp" / "fhir_standin.py"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


standin_module = _load_standin()


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[str, object]]:
    """A FHIR stand-in and, in front of it, the FHIR MCP server with a per-run base."""
    fhir = standin_module.StandinFhir()
    with (
        standin_module.serve(fhir.app) as fhir_origin,
        standin_module.serve(fhir_mcp_http_app(f"{fhir_origin}/run/{{run}}/fhir")) as mcp_origin,
    ):
        yield f"{mcp_origin}/mcp", fhir


async def test_plan_creates_then_updates_by_reference(servers):
    mcp_url, fhir = servers
    plan = plan_from_dict(
        {
            "name": "create-then-correct",
            "steps": [
                {
                    "call": "createResource",
                    "args": {
                        "resourceType": "Patient",
                        "body_json": {"name": [{"family": "Smyth"}]},
                    },
                    "save": "created",
                },
                {
                    "call": "updateResource",
                    "args": {
                        "resourceType": "Patient",
                        "resourceId": "${created.id}",
                        "body_json": {"$merge": ["${created}", {"name": [{"family": "Smith"}]}]},
                        "ifMatchVersion": "${created.meta.versionId}",
                    },
                    "save": "updated",
                },
                {"answer": "Patient ${created.id} is now ${updated.name.0.family} (v${updated.meta.versionId})"},
            ],
        }
    )
    async with McpToolbox(mcp_url, {"X-Fae-Run": "plan1", "X-Fae-Actor": "agent"}) as box:
        played = await run_plan(plan, toolbox_call(box))
    created = played.calls[0][2].result
    assert [name for name, _, _ in played.calls] == ["createResource", "updateResource"]
    assert not any(outcome.is_error for _, _, outcome in played.calls)
    assert played.calls[1][1]["resourceId"] == created["id"]
    assert played.answer == f"Patient {created['id']} is now Smith (v2)"
    writes = [(r["method"], r["rest"]) for r in fhir.requests if r["prefix"] == "/run/plan1/fhir"]
    assert writes == [("POST", ["Patient"]), ("PUT", ["Patient", created["id"]])]


async def test_a_failed_tool_call_does_not_stop_the_plan(servers):
    mcp_url, _ = servers
    plan = plan_from_dict(
        [
            {
                "call": "getResourceById",
                "args": {"resourceType": "Patient", "resourceId": "missing"},
                "save": "r",
            },
            {"call": "noSuchTool", "args": {}},
            {"answer": "status ${r.status}"},
        ]
    )
    async with McpToolbox(mcp_url, {"X-Fae-Run": "plan2"}) as box:
        played = await run_plan(plan, toolbox_call(box))
    assert [outcome.is_error for _, _, outcome in played.calls] == [True, True]
    assert "noSuchTool" in str(played.calls[1][2].result)
    assert played.answer == "status 404"


async def test_list_tools_gives_openai_definitions(servers):
    mcp_url, _ = servers
    async with McpToolbox(mcp_url) as box:
        tools = await box.list_tools()
    search = next(tool.openai_tool() for tool in tools if tool.name == "searchResources")
    assert search["type"] == "function"
    assert search["function"]["parameters"]["properties"]["resourceType"]["type"] == "string"
    assert "page_limit" in search["function"]["description"]


async def test_unreachable_server_raises_connection_error():
    url = f"http://127.0.0.1:{standin_module.closed_port()}/mcp"
    with pytest.raises(ConnectionError, match="cannot reach MCP server"):
        async with McpToolbox(url):
            pass


async def test_toolbox_outside_async_with_refuses():
    with pytest.raises(RuntimeError, match="async with"):
        await McpToolbox("http://127.0.0.1:1/mcp").list_tools()


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (CallToolResult(content=[TextContent(type="text", text='{"a": 1}')]), {"a": 1}),
        (CallToolResult(content=[TextContent(type="text", text="plain words")]), "plain words"),
        (
            CallToolResult(content=[TextContent(type="text", text="see data")], structured_content={"b": 2}),
            {"b": 2},
        ),
        (
            CallToolResult(
                content=[TextContent(type="text", text="1"), TextContent(type="text", text="two")],
            ),
            [1, "two"],
        ),
        (
            CallToolResult(content=[ImageContent(type="image", data="AA==", mime_type="image/png")]),
            None,
        ),
    ],
)
def test_outcome_of(result, expected):
    assert outcome_of(result).result == expected
    assert outcome_of(result).is_error is False
    assert outcome_of(result.model_copy(update={"is_error": True})).is_error is True
