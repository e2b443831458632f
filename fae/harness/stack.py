"""The services one recording needs, started in process and torn down together.

log writer → live-query endpoint → FHIR server (embedded, or an external base)
→ FHIR MCP server → recording proxy in front of all of them. Every client
reaches an upstream through the proxy, at ``/run/{run}/{actor}/{upstream}/``.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from fae.errors import RecordError
from fae.proxy.routes import Upstream
from fae.proxy.server import ProxyHandle, run_proxy
from fae.recorder.recorder import Recorder
from fae.recorder.redact import Redactor
from fae.store.live import LiveQueryServer
from fae.store.log import EventLog
from fae.store.writer import LogWriter, open_writer
from fae.util.serve import serve_asgi


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


@asynccontextmanager
async def open_stack(log_path: str | Path, *, fhir_url: str | None = None, llm_url: str | None = None,
                     redactor: Redactor | None = None) -> AsyncIterator[Stack]:
    """Start everything a recording needs; yields when all of it is listening."""
    async with AsyncExitStack() as stack:
        log = stack.enter_context(EventLog(log_path))
        stack.enter_context(LiveQueryServer(log))
        writer = await stack.enter_async_context(open_writer(log))
        upstreams: dict[str, Upstream] = {}
        embedded = fhir_url is None
        if embedded:
            from fae.fhir.app import create_app
            from fae.fhir.engine import FhirEngine

            fhir_port = await stack.enter_async_context(serve_asgi(create_app(FhirEngine())))
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
        if llm_url:
            upstreams["llm"] = Upstream("llm", llm_url.rstrip("/").removesuffix("/v1"), "llm")
        try:
            proxy = await stack.enter_async_context(run_proxy(upstreams, Recorder(writer, redactor)))
        except OSError as exc:
            raise RecordError(f"the recording proxy could not start: {exc}") from None
        proxy_ref["proxy"] = proxy
        yield Stack(log=log, writer=writer, proxy=proxy, embedded=embedded, llm_upstream=bool(llm_url))
