import json
import sys

import pytest
from mcp import StdioServerParameters

from fae.agents.mcp_client import McpToolbox
from fae.memory.reflection_store import MacroReflection, MemoryStore, MicroReflection
from fae.memory.server import memory_mcp_http_app
from fae.util.serve import serve_asgi
from tests.memory.conftest import NOW

pytestmark = pytest.mark.anyio


def fill(store: MemoryStore) -> None:
    store.add_micro(
        [
            MicroReflection(
                resource="Slot",
                operation="update",
                tip="mark the booked slot busy",
                success=True,
                task_id="sched-book-appointment",
                created_at=NOW,
            )
        ]
    )
    store.add_macro(
        [
            MacroReflection(
                text="t",
                macro_summary="Book an appointment, then mark the slot busy",
                heuristic="",
                success=True,
                task_id="sched-book-appointment",
                created_at=NOW,
            ),
            MacroReflection(
                text="t",
                macro_summary="Create a patient after searching for duplicates",
                heuristic="",
                success=True,
                task_id="rec-create-patient",
                created_at=NOW,
            ),
        ]
    )


async def test_tools_over_streamable_http(tmp_path, embedder):
    store = MemoryStore.create(tmp_path / "m", embedder, created_at=NOW)
    async with serve_asgi(memory_mcp_http_app(tmp_path / "m")) as port:
        async with McpToolbox(f"http://127.0.0.1:{port}/mcp") as box:
            listed = {tool.name for tool in await box.list_tools()}
            assert listed == {"search_memory", "search_macro_reflections", "search_micro_tips", "memory_stats"}
            # every memory tool tells clients it only reads, repeatably, and stays inside the store
            raw = (await box.client.list_tools()).tools
            hints = {
                (t.annotations.read_only_hint, t.annotations.idempotent_hint, t.annotations.open_world_hint)
                for t in raw
                if t.annotations is not None
            }
            assert hints == {(True, True, False)} and all(t.annotations for t in raw), raw
            empty = await box.call_tool("memory_stats", {})
            assert empty.result["macro"] == 0
            fill(store)  # appended while the server runs: the next call sees it
            macro = await box.call_tool("search_memory", {"query": "book an appointment slot", "k": 1})
            assert macro.result["kind"] == "macro"
            assert macro.result["results"][0]["task_id"] == "sched-book-appointment"
            assert "_score" in macro.result["results"][0]
            micro = await box.call_tool("search_memory", {"resource": "Slot", "operation": "update"})
            assert micro.result["results"][0]["tip"] == "mark the booked slot busy"
            direct = await box.call_tool("search_micro_tips", {"resource": "Slot", "operation": "create"})
            assert direct.result["results"] == []
            bad = await box.call_tool("search_memory", {"resource": "Slot"})
            assert bad.result["error"] == "BAD_ARGUMENTS"
            stats = await box.call_tool("memory_stats", {})
            assert (stats.result["macro"], stats.result["micro"]) == (2, 1)
            assert stats.result["index"] in ("faiss", "numpy")


async def test_a_missing_store_is_an_answer_not_a_crash(tmp_path):
    async with serve_asgi(memory_mcp_http_app(tmp_path / "nothing")) as port:
        async with McpToolbox(f"http://127.0.0.1:{port}/mcp") as box:
            reply = await box.call_tool("search_macro_reflections", {"query": "x"})
            assert reply.result["error"] == "MemoryStoreError" and "no memory store" in reply.result["diagnostics"]


async def test_stdio_transport(tmp_path, embedder):
    fill(MemoryStore.create(tmp_path / "m", embedder, created_at=NOW))
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "fae.cli", "memory", "serve", "--store", str(tmp_path / "m")]
    )
    async with McpToolbox.stdio(params) as box:
        reply = await box.call_tool("search_micro_tips", {"resource": "slot", "operation": "update"})
    assert json.dumps(reply.result).count("mark the booked slot busy") == 1
