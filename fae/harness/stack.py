"""The services one recording needs, started in process and torn down together.

log writer → live-query endpoint → FHIR server (embedded, or an external base)
→ FHIR MCP server, FHIR specs MCP server and any Reflexion memory MCP servers
→ recording proxy in front of all of them. Every client
reaches an upstream through the proxy, at ``/run/{run}/{actor}/{upstream}/``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx

from fae.errors import FaeError, RecordError
from fae.fhir.audit import IDENTITY_HEADER
from fae.proxy.addon import DEFAULT_MAX_BODY_BYTES
from fae.proxy.routes import Upstream
from fae.proxy.server import ProxyHandle, run_proxy
from fae.recorder.recorder import Recorder
from fae.recorder.redact import Redactor
from fae.store.live import LiveQueryServer
from fae.store.log import EventLog
from fae.store.writer import LogWriter, open_writer
from fae.util.serve import serve_asgi

_STORE_NAME = re.compile(r"[a-z][a-z0-9-]{0,19}")


def sandbox_id(run_id: str) -> str:
    """The embedded server's sandbox for a run: short, FHIR-id safe, derived from the run id."""
    return "sb-" + hashlib.sha256(run_id.encode()).hexdigest()[:20]


@dataclass
class Stack:
    log: EventLog
    writer: LogWriter
    proxy: ProxyHandle
    embedded: bool
    llm_upstream: bool
    extra_mcp_upstreams: dict[str, str] = field(default_factory=dict)
    """Extra MCP servers behind the proxy: the name an agent knows them by → proxy upstream name."""
    audit_events: bool = False
    """The FHIR server keeps an AuditEvent trail, which the harness reads back after each run."""

    def fhir_base(self, run_id: str, actor: str) -> str:
        """The proxied FHIR base a client uses in ``run_id`` as ``actor``."""
        if self.embedded:
            return self.proxy.url(run_id, actor, "fhir", f"sandbox/{sandbox_id(run_id)}/fhir")
        return self.proxy.url(run_id, actor, "fhir")

    def fhir_root(self, run_id: str, actor: str) -> str:
        return self.proxy.url(run_id, actor, "fhir")

    def mcp_url(self, run_id: str, actor: str = "agent") -> str:
        return self.proxy.url(run_id, actor, "mcp-fhir", "mcp")

    def llm_base(self, run_id: str, actor: str = "agent") -> str | None:
        return self.proxy.url(run_id, actor, "llm", "v1").rstrip("/") if self.llm_upstream else None

    async def unreachable(self, timeout_s: float = 5.0) -> str | None:
        """The first part of the stack that accepts no connection (proxy, FHIR, MCP servers), or None.

        The LLM is left out: it is the agent's own upstream, and its faults are the agent's.
        """
        parts = {"the recording proxy": self.proxy.base_url,
                 **{f"the {name} upstream": upstream.base_url for name, upstream in self.proxy.upstreams.items()
                    if upstream.kind != "llm"}}
        for part, base in parts.items():
            url = httpx.URL(base)
            port = url.port or (443 if url.scheme == "https" else 80)
            try:
                with anyio.fail_after(timeout_s):
                    stream = await anyio.connect_tcp(url.host, port)
            except (OSError, TimeoutError):
                return f"{part} ({url.host}:{port})"
            await stream.aclose()
        return None

    def extra_mcp(self, run_id: str, actor: str = "agent") -> dict[str, str]:
        """Proxied URLs of the extra MCP servers (``specs``, ``memory:NAME``) for ``AgentContext.extra_mcp``."""
        return {name: self.proxy.url(run_id, actor, upstream, "mcp")
                for name, upstream in self.extra_mcp_upstreams.items()}


def actor_identities(app: Any) -> Any:
    """The embedded server behind the proxy, with each actor presenting its own identity.

    A caller that presents none (no ``X-Fae-Identity``, no bearer token) is audited as the actor
    the proxy routed it as, the way each actor would hold its own credential on a real server;
    a call straight to the server, bypassing the proxy, stays anonymous.
    """

    async def with_identity(scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            headers = list(scope.get("headers") or [])
            names = {name.lower() for name, _ in headers}
            actor = next((value for name, value in headers if name.lower() == b"x-fae-actor"), None)
            if actor and IDENTITY_HEADER.encode() not in names and b"authorization" not in names:
                scope = {**scope, "headers": [*headers, (IDENTITY_HEADER.encode(), actor)]}
        await app(scope, receive, send)

    return with_identity


def memory_app_factory() -> Callable[[Path], Any]:
    """``fae.memory.server.memory_mcp_http_app``, or a FaeError saying it is not installed."""
    try:
        from fae.memory.server import memory_mcp_http_app
    except ImportError as exc:
        raise FaeError(
            "the Reflexion memory MCP server is missing: fae.memory.server.memory_mcp_http_app "
            f"cannot be imported ({exc}); the memory agent configurations need it") from None
    return memory_mcp_http_app


def _memory_apps(stores: Mapping[str, Path]) -> dict[str, Any]:
    """One memory MCP app per named store directory, checked before anything starts."""
    if not stores:
        return {}
    factory = memory_app_factory()
    apps = {}
    for store_name, store_dir in stores.items():
        if not _STORE_NAME.fullmatch(store_name):
            raise FaeError(f"memory store name {store_name!r}: use lower-case letters, digits and -")
        if not Path(store_dir).is_dir():
            raise FaeError(f"memory store {store_name!r}: {store_dir} is not a directory")
        apps[store_name] = factory(Path(store_dir))
    return apps


def parse_memory_stores(values: list[str]) -> dict[str, Path]:
    """``--memory NAME=DIR`` options as ``{NAME: DIR}``."""
    stores: dict[str, Path] = {}
    for value in values:
        name, _, directory = value.partition("=")
        if name in stores:
            raise FaeError(f"--memory {value!r}: the store {name!r} is given twice")
        if not _STORE_NAME.fullmatch(name) or not directory:
            raise FaeError(f"--memory {value!r}: expected NAME=DIR, NAME in lower-case letters, digits and -")
        stores[name] = Path(directory)
    return stores


def memory_upstream_name(store: str) -> str:
    """The proxy upstream that serves the memory store called ``store``."""
    return f"mcp-memory-{store}"


@asynccontextmanager
async def open_stack(log_path: str | Path, *, fhir_url: str | None = None, llm_url: str | None = None,
                     redactor: Redactor | None = None,
                     memory_stores: Mapping[str, Path] | None = None,
                     fhir_engine: Any | None = None,
                     audit_events: bool = False, fsync: bool = False,
                     max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> AsyncIterator[Stack]:
    """Start everything a recording needs; yields when all of it is listening.

    ``memory_stores`` names Reflexion memory store directories (e.g. ``{"spec": Path(...)}``);
    each is served by its own memory MCP server, reached by agents as ``extra_mcp["memory:NAME"]``.
    ``fhir_engine`` is the embedded server's engine when the caller needs its own (``fae replay``
    passes one that hands out the recorded resource ids).
    ``audit_events`` turns the embedded server's AuditEvent trail on (each actor audited under its
    own name); with ``fhir_url`` it says that the external server keeps one. Either way the harness
    reads the trail back through the proxy after each run. ``fsync``: every journal append reaches
    the disk before the writer answers (survives power loss, at a cost per exchange).
    ``max_body_bytes``: the proxy answers 413 to a larger request body (and records that it did).
    """
    memory_apps = _memory_apps(memory_stores or {})
    async with AsyncExitStack() as stack:
        log = stack.enter_context(EventLog(log_path))
        stack.enter_context(LiveQueryServer(log))
        writer = await stack.enter_async_context(open_writer(log, fsync=fsync))
        upstreams: dict[str, Upstream] = {}
        embedded = fhir_url is None
        if fhir_url is None:
            from fae.fhir.app import create_app
            from fae.fhir.engine import FhirEngine

            engine = fhir_engine if fhir_engine is not None else FhirEngine()
            if audit_events:
                engine.audit_events = True  # every sandbox created from now on keeps a trail
            fhir_app: Any = create_app(engine)
            if audit_events:
                fhir_app = actor_identities(fhir_app)
            fhir_port = await stack.enter_async_context(serve_asgi(fhir_app))
            upstreams["fhir"] = Upstream("fhir", f"http://127.0.0.1:{fhir_port}", "fhir")
        else:
            upstreams["fhir"] = Upstream("fhir", fhir_url.rstrip("/"), "fhir")

        proxy_ref: dict[str, ProxyHandle] = {}

        def base_for(headers: Mapping[str, str]) -> str:
            lowered = {k.lower(): v for k, v in headers.items()}
            run_id = lowered.get("x-fae-run")
            if not run_id or "proxy" not in proxy_ref:
                raise KeyError("the MCP request did not come through the recording proxy (no X-Fae-Run)")
            actor = lowered.get("x-fae-actor", "agent")
            handle = proxy_ref["proxy"]
            if embedded:
                return handle.url(run_id, actor, "fhir", f"sandbox/{sandbox_id(run_id)}/fhir")
            return handle.url(run_id, actor, "fhir")

        from fae.mcp.fhir_server import fhir_mcp_http_app

        mcp_port = await stack.enter_async_context(serve_asgi(fhir_mcp_http_app(base_for)))
        upstreams["mcp-fhir"] = Upstream("mcp-fhir", f"http://127.0.0.1:{mcp_port}", "mcp")
        from fae.mcp.specs_server import specs_mcp_http_app

        specs_port = await stack.enter_async_context(serve_asgi(specs_mcp_http_app()))
        upstreams["mcp-specs"] = Upstream("mcp-specs", f"http://127.0.0.1:{specs_port}", "mcp")
        extra = {"specs": "mcp-specs"}
        for store_name, memory_app in memory_apps.items():
            memory_port = await stack.enter_async_context(serve_asgi(memory_app))
            upstream_name = memory_upstream_name(store_name)
            upstreams[upstream_name] = Upstream(upstream_name, f"http://127.0.0.1:{memory_port}", "mcp")
            extra[f"memory:{store_name}"] = upstream_name
        if llm_url:
            upstreams["llm"] = Upstream("llm", llm_url.rstrip("/").removesuffix("/v1"), "llm")
        try:
            proxy = await stack.enter_async_context(run_proxy(upstreams, Recorder(writer, redactor),
                                                                    max_body_bytes=max_body_bytes))
        except OSError as exc:
            raise RecordError(f"the recording proxy could not start: {exc}") from None
        proxy_ref["proxy"] = proxy
        yield Stack(log=log, writer=writer, proxy=proxy, embedded=embedded, llm_upstream=bool(llm_url),
                    extra_mcp_upstreams=extra, audit_events=audit_events)
