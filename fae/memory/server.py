"""The Reflexion memory MCP server: read-only tools over a memory store directory.

Tools: ``search_memory`` (macro search when given a query, else micro tips for
a resource and operation), ``search_macro_reflections``, ``search_micro_tips``
and ``memory_stats``. Each call first picks up whatever a trainer appended
since the last call, so a server can run while ``fae train-memory`` writes.
Served over stdio, stateless streamable HTTP with plain JSON answers (so the
recording proxy sees one exchange per call) or legacy SSE, like the FHIR MCP server.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations
from starlette.applications import Starlette

from fae.errors import FaeError
from fae.mcp.transports import http_app
from fae.memory.embeddings import Embedder, OpenAIEmbedder, routed
from fae.memory.reflection_store import MemoryStore, read_manifest
from fae.proxy.routes import proxied_route

SERVER_NAME = "memory"
MAX_K = 20


class _StoreHandle:
    """Opens the store on first use (it may not exist yet when the server starts), then refreshes it."""

    def __init__(self, store_dir: Path, embedder: Embedder | None) -> None:
        self.store_dir = store_dir
        self.embedder = embedder
        self._store: MemoryStore | None = None
        self._lock = threading.Lock()

    def get(self) -> MemoryStore:
        with self._lock:
            if self._store is None:
                self._store = MemoryStore.open(self.store_dir, self.embedder or _routed_embedder(self.store_dir))
            else:
                self._store.refresh()
            return self._store


NO_ROUTE = "http://no-route.invalid/v1"
"""Where a query embedding of an ``openai:`` store goes when neither the proxy nor ``OPENAI_BASE_URL`` says."""


def _routed_embedder(store_dir: Path) -> Embedder | None:
    """For an ``openai:MODEL`` store: an embedder that sends each query's embedding where the request routes it
    (``routed``), else to ``OPENAI_BASE_URL``; None (the store's own choice) for the offline embedders."""
    embedding = read_manifest(store_dir)["embedding"]
    name = str(embedding.get("name", ""))
    if not name.startswith("openai:"):
        return None
    return OpenAIEmbedder(
        os.environ.get("OPENAI_BASE_URL") or NO_ROUTE,
        name.removeprefix("openai:"),
        api_key=os.environ.get("OPENAI_API_KEY"),
        dimension=int(embedding["dimension"]),
    )


def _llm_base(ctx: Context | None) -> str | None:
    """The calling run's proxied LLM base (``/v1``), from the headers the recording proxy sets on each request it
    forwards; None when the request did not come that way (``fae memory serve`` on its own)."""
    request = ctx.request_context.request if ctx is not None else None
    return proxied_route(getattr(request, "headers", None) or {}, "llm", "v1")


def _k(k: int) -> int:
    return max(1, min(int(k), MAX_K))


def build_memory_mcp(store_dir: str | Path, *, embedder: Embedder | None = None) -> MCPServer:
    """An MCP server named ``memory`` answering from the store at ``store_dir``."""
    handle = _StoreHandle(Path(store_dir), embedder)

    async def guarded(work, ctx: Context | None = None) -> dict[str, Any]:
        # Store reads and query embedding block (files, a model, maybe an HTTP endpoint): off the loop. A query's
        # embedding goes through the proxy as the run that asked, so the log keeps it.
        base = _llm_base(ctx)

        def routed_work() -> dict[str, Any]:
            with routed(base):
                return work()

        try:
            return await anyio.to_thread.run_sync(routed_work)
        except FaeError as exc:
            return {"error": type(exc).__name__, "diagnostics": str(exc)}

    def macro(query: str, k: int) -> dict[str, Any]:
        hits = handle.get().search_macro(query, _k(k))
        return {"kind": "macro", "query": query, "results": [hit.as_dict() for hit in hits]}

    def micro(resource: str, operation: str, k: int) -> dict[str, Any]:
        import msgspec

        tips = handle.get().micro_tips(resource, operation, _k(k))
        return {
            "kind": "micro",
            "resource": resource,
            "operation": operation,
            "results": [msgspec.to_builtins(tip) for tip in tips],
        }

    async def search_memory(
        ctx: Context,
        query: str | None = None,
        resource: str | None = None,
        operation: str | None = None,
        k: int = 3,
    ) -> dict[str, Any]:
        """Search the long-term memory: strategies similar to ``query`` when it is given,
        otherwise the newest tips for exactly this FHIR ``resource`` (e.g. Appointment)
        and ``operation`` (create, search, read, update or delete)."""
        if query:
            return await guarded(lambda: macro(query, k), ctx)
        if resource and operation:
            return await guarded(lambda: micro(resource, operation, k))
        return {"error": "BAD_ARGUMENTS", "diagnostics": "give a query, or both a resource and an operation"}

    async def search_macro_reflections(query: str, ctx: Context, k: int = 3) -> dict[str, Any]:
        """Task-level strategies learnt in training, nearest in meaning to ``query``, best
        first, each with its cosine ``_score``."""
        return await guarded(lambda: macro(query, k), ctx)

    async def search_micro_tips(resource: str, operation: str, k: int = 3) -> dict[str, Any]:
        """The newest tips for one FHIR resource type and operation (create, search, read,
        update or delete), matched exactly, case-insensitive."""
        return await guarded(lambda: micro(resource, operation, k))

    async def memory_stats() -> dict[str, Any]:
        """How many micro and macro reflections the memory holds, for which tasks and
        resource/operation pairs, and which embedding backend and index serve it."""
        return await guarded(lambda: handle.get().stats())

    server = MCPServer(
        SERVER_NAME,
        log_level="WARNING",
        instructions=(
            "Read-only long-term memory of earlier FHIR tasks. Search macro reflections "
            "with a description of your task before you start, and micro tips for a "
            "resource and operation before each FHIR call."
        ),
    )
    read_only = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
    for tool in (search_memory, search_macro_reflections, search_micro_tips, memory_stats):
        server.add_tool(tool, annotations=read_only)
    return server


def memory_mcp_http_app(store_dir: str | Path, *, embedder: Embedder | None = None, path: str = "/mcp") -> Starlette:
    """The memory tools over stateless streamable HTTP at ``path`` and legacy SSE at /sse (see fae.mcp.transports)."""
    return http_app(build_memory_mcp(store_dir, embedder=embedder), path=path)
