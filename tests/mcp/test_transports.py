"""fae's MCP servers over legacy HTTP+SSE beside streamable HTTP: the current SDK, an mcp<2 client, the CLI."""

from __future__ import annotations

import inspect
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from fhir_standin import StandinFhir, serve
from mcp import Client
from mcp.client.sse import sse_client
from served import served
from typer.testing import CliRunner

from fae.agents.mcp_client import McpToolbox
from fae.cli import app as fae_app
from fae.cli import mcp as mcp_cli
from fae.cli import memory as memory_cli
from fae.mcp.endpoints import FHIR_PORT, MEMORY_PORT, SPECS_PORT
from fae.mcp.fhir_server import fhir_mcp_http_app
from fae.mcp.specs_server import specs_mcp_http_app
from fae.memory.embeddings import HashedEmbedder
from fae.memory.reflection_store import MemoryStore
from fae.proxy.routes import Upstream
from fae.proxy.server import run_proxy
from fae.recorder.recorder import Recorder
from fae.store.log import EventLog
from fae.store.writer import open_writer
from fae.util.serve import serve_asgi
from tests.memory.conftest import NOW

LEGACY_CLIENT = Path(__file__).with_name("legacy_sse_client.py")


@pytest.fixture
def embedder() -> HashedEmbedder:
    return HashedEmbedder()


async def sse_session(url: str, calls: list[tuple[str, dict[str, Any]]]) -> tuple[set[str], list[Any]]:
    """Tool names and the parsed results of ``calls``, over one SSE session of the current SDK."""
    async with Client(sse_client(url)) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        results = []
        for name, arguments in calls:
            reply = await client.call_tool(name, arguments)
            results.append((reply.is_error, json.loads(reply.content[0].text)))
    return names, results


@pytest.mark.anyio
async def test_specs_http_serves_streamable_and_sse_side_by_side():
    with served("mcp", "specs", "--transport", "http") as origin:
        async with McpToolbox(f"{origin}/mcp") as box:
            streamable = await box.call_tool("getStructureDefinition", {"resourceType": "patient"})
        names, [(is_error, found)] = await sse_session(
            f"{origin}/sse", [("getStructureDefinition", {"resourceType": "patient"})]
        )
    assert streamable.result["resourceType"] == "Patient"
    assert "getSearchParams" in names
    assert not is_error and found["resourceType"] == "Patient"


@pytest.fixture(scope="module")
def standin():
    fhir = StandinFhir()
    with serve(fhir.app) as origin:
        yield origin, fhir


@pytest.mark.anyio
async def test_fhir_sse_transport_acts_on_fhir_and_serves_sse_only(standin):
    origin_fhir, fhir = standin
    with served("mcp", "fhir", "--fhir-base", f"{origin_fhir}/sse-only/fhir", "--transport", "sse") as origin:
        _, [(created_error, created), (missing_error, missing)] = await sse_session(
            f"{origin}/sse",
            [
                ("createResource", {"resourceType": "Patient", "body_json": {"name": [{"family": "Sse"}]}}),
                ("getResourceById", {"resourceType": "Patient", "resourceId": "nope"}),
            ],
        )
        async with httpx.AsyncClient() as client:
            streamable = await client.post(f"{origin}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert not created_error and created["name"][0]["family"] == "Sse", created
    stored = fhir.stores["/sse-only/fhir"][("Patient", created["id"])]
    assert stored["name"][0]["family"] == "Sse"
    assert missing_error and missing["status"] == 404, missing
    assert streamable.status_code == 404  # --transport sse serves the legacy transport alone


@pytest.mark.anyio
async def test_the_agents_toolbox_speaks_sse_to_a_url_ending_in_sse(standin):
    origin_fhir, fhir = standin
    with served("mcp", "fhir", "--fhir-base", f"{origin_fhir}/toolbox/fhir", "--transport", "sse") as origin:
        async with McpToolbox(f"{origin}/sse") as box:  # an SSE-only server: streamable HTTP would get 404
            names = {tool.name for tool in await box.list_tools()}
            created = await box.call_tool(
                "createResource", {"resourceType": "Patient", "body_json": {"name": [{"family": "Box"}]}}
            )
        with pytest.raises(ConnectionError, match="cannot reach MCP server"):
            async with McpToolbox(f"{origin}/mcp"):
                pass
    assert "createResource" in names
    assert not created.is_error, created
    assert fhir.stores["/toolbox/fhir"][("Patient", created.result["id"])]["name"][0]["family"] == "Box"


@pytest.mark.anyio
async def test_memory_serve_over_sse(tmp_path, embedder):
    MemoryStore.create(tmp_path / "m", embedder, created_at=NOW)
    with served("memory", "serve", "--store", str(tmp_path / "m"), "--transport", "sse") as origin:
        names, [(is_error, stats)] = await sse_session(f"{origin}/sse", [("memory_stats", {})])
    assert "search_memory" in names
    assert not is_error and (stats["macro"], stats["micro"]) == (0, 0)


def test_sse_endpoint_event_leads_back_through_the_forwarding_proxy():
    def endpoint(headers: dict[str, str]) -> str:
        with serve(specs_mcp_http_app()) as origin, httpx.stream("GET", f"{origin}/sse", headers=headers) as reply:
            for line in reply.iter_lines():
                if line.startswith("data:"):
                    return line[5:].strip()
        raise AssertionError("the SSE stream closed before its endpoint event")

    assert endpoint({}).startswith("/messages/?session_id=")
    proxied = endpoint({"x-forwarded-prefix": "/run/r1/agent/specs"})
    assert proxied.startswith("/run/r1/agent/specs/messages/?session_id="), proxied
    # a prefix that is not a plain path is not trusted
    assert endpoint({"x-forwarded-prefix": "http://elsewhere/x"}).startswith("/messages/?session_id=")


@pytest.fixture(scope="module")
def legacy_python(tmp_path_factory) -> str:
    """An interpreter with ``mcp<2`` installed, in a throwaway venv."""
    uv = os.environ.get("UV") or shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not available to build a venv with mcp<2")
    venv = tmp_path_factory.mktemp("mcp1") / "venv"
    made = subprocess.run(
        [uv, "venv", "-q", str(venv), "-p", sys.executable], capture_output=True, text=True, check=False
    )
    python = venv / "bin" / "python"
    if made.returncode == 0:
        made = subprocess.run(
            [uv, "pip", "install", "-q", "--python", str(python), "mcp<2"],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    if made.returncode != 0:
        pytest.skip(f"cannot install mcp<2 in a throwaway venv: {made.stderr.strip().splitlines()[-1:]}")
    return str(python)


def test_an_mcp_v1_client_speaks_sse_to_the_fhir_server(standin, legacy_python):
    origin_fhir, fhir = standin
    calls = [
        ["createResource", {"resourceType": "Patient", "body_json": {"name": [{"family": "Legacy"}]}}],
        ["searchResources", {"resourceType": "Patient", "params_json": {"family": "Legacy"}}],
    ]
    with served("mcp", "fhir", "--fhir-base", f"{origin_fhir}/legacy/fhir", "--transport", "http") as origin:
        run = subprocess.run(
            [legacy_python, str(LEGACY_CLIENT), f"{origin}/sse", json.dumps(calls)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert run.returncode == 0, run.stderr[-2000:]
    version = subprocess.run(
        [legacy_python, "-c", "import importlib.metadata as m; print(m.version('mcp'))"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    assert version.startswith("1."), version
    out = json.loads(run.stdout)
    assert "createResource" in out["tools"]
    created, found = out["calls"]
    assert not created["isError"], created
    assert fhir.stores["/legacy/fhir"][("Patient", created["result"]["id"])]["name"] == [{"family": "Legacy"}]
    assert [e["resource"]["id"] for e in found["result"]["entry"]] == [created["result"]["id"]]


def test_default_ports_differ():
    defaults = {
        "fhir": inspect.signature(mcp_cli.fhir).parameters["port"].default,
        "specs": inspect.signature(mcp_cli.specs).parameters["port"].default,
        "memory": inspect.signature(inspect.unwrap(memory_cli.serve)).parameters["port"].default,
    }
    assert defaults == {"fhir": FHIR_PORT, "specs": SPECS_PORT, "memory": MEMORY_PORT}
    assert len(set(defaults.values())) == 3


@pytest.fixture
def busy_port():
    with socket.create_server(("127.0.0.1", 0)) as taken:
        yield taken.getsockname()[1]


@pytest.mark.parametrize(
    "command",
    [
        ["mcp", "fhir", "--fhir-base", "http://127.0.0.1:1/fhir", "--transport", "http"],
        ["mcp", "fhir", "--fhir-base", "http://127.0.0.1:1/fhir", "--transport", "sse"],
        ["mcp", "specs", "--transport", "http"],
        ["mcp", "specs", "--transport", "sse"],
        ["memory", "serve", "--store", "STORE", "--transport", "http"],
        ["llm", "serve"],
    ],
)
@pytest.mark.parametrize("port", ["99999", "-1", "busy"])
def test_a_bad_or_busy_port_is_one_line_and_exit_1(command, port, busy_port, tmp_path, embedder):
    if "STORE" in command:
        MemoryStore.create(tmp_path / "m", embedder, created_at=NOW)
        command = [str(tmp_path / "m") if part == "STORE" else part for part in command]
    wanted = str(busy_port) if port == "busy" else port
    result = CliRunner().invoke(fae_app, [*command, "--port", wanted])
    output = result.output.strip()
    assert result.exit_code == 1, (result.exit_code, output, result.exception)
    assert "Traceback" not in output and len(output.splitlines()) == 1, output
    assert f"cannot listen on 127.0.0.1:{wanted}" in output, output


@pytest.mark.anyio
async def test_over_sse_through_the_proxy_each_call_reaches_its_runs_fhir_base(standin, tmp_path):
    origin_fhir, fhir = standin
    proxied: dict[str, Any] = {}

    def base_for(headers) -> str:  # as the harness does: the run's own FHIR base, through the proxy
        run, actor = headers["x-fae-run"], headers["x-fae-actor"]
        return proxied["proxy"].url(run, actor, "fhir", f"{run}/fhir")

    log = EventLog(tmp_path / "log.duckdb")
    async with serve_asgi(fhir_mcp_http_app(base_for)) as mcp_port:
        upstreams = {
            "fhir": Upstream("fhir", origin_fhir, "fhir"),
            "mcp-fhir": Upstream("mcp-fhir", f"http://127.0.0.1:{mcp_port}", "mcp"),
        }
        async with open_writer(log) as writer, run_proxy(upstreams, Recorder(writer)) as proxy:
            proxied["proxy"] = proxy
            for run in ("run-a", "run-b"):
                _, [(is_error, created)] = await sse_session(
                    proxy.url(run, "agent", "mcp-fhir", "sse"),
                    [("createResource", {"resourceType": "Patient", "body_json": {"name": [{"family": run}]}})],
                )
                assert not is_error, created
                assert fhir.stores[f"/{run}/fhir"][("Patient", created["id"])]["name"] == [{"family": run}]
    log.close()
    with EventLog(tmp_path / "log.duckdb", read_only=True) as opened:
        _, rows = opened.query("SELECT run_id, upstream FROM events WHERE kind = 'ToolCalled' ORDER BY run_id")
        _, writes = opened.query(
            "SELECT run_id FROM events WHERE kind = 'HttpExchanged' AND upstream = 'fhir' ORDER BY run_id"
        )
    assert rows == [("run-a", "mcp-fhir"), ("run-b", "mcp-fhir")]
    assert writes == [("run-a",), ("run-b",)]


@pytest.mark.anyio
async def test_a_legacy_session_takes_messages_from_its_own_run_only(tmp_path):
    """A session id is in the log; another run that learns it is answered as if the session did not exist."""
    message = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    log = EventLog(tmp_path / "log.duckdb")
    async with serve_asgi(specs_mcp_http_app()) as port:
        upstreams = {"mcp-specs": Upstream("mcp-specs", f"http://127.0.0.1:{port}", "mcp")}
        async with (
            open_writer(log) as writer,
            run_proxy(upstreams, Recorder(writer)) as proxy,
            httpx.AsyncClient(timeout=30) as client,
            client.stream("GET", proxy.url("run-a", "agent", "mcp-specs", "sse")) as stream,
        ):
            chunks, head = stream.aiter_raw(), b""  # one iterator, never left: leaving it closes the stream
            while b"\r\n\r\n" not in head:
                head += await anext(chunks)
            endpoint = head.split(b"data: ", 1)[1].split(b"\r\n", 1)[0].decode()
            session = endpoint.partition("?")[2]
            assert endpoint.startswith(proxy.url("run-a", "agent", "mcp-specs").removeprefix(proxy.base_url)), endpoint
            foreign = await client.post(proxy.url("run-b", "agent", "mcp-specs", f"messages/?{session}"), json=message)
            own = await client.post(proxy.base_url + endpoint, json=message)
    log.close()
    assert (foreign.status_code, foreign.text) == (404, "Could not find session")
    assert own.status_code == 202, own.text
