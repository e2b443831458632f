"""The services one recording needs, started together and torn down together.

log writer → live-query endpoint → FHIR server (embedded, or an external base)
→ FHIR MCP server, FHIR specs MCP server and any Reflexion memory MCP servers
→ recording proxy in front of all of them. Every client
reaches an upstream through the proxy, at ``/run/{run}/{actor}/{capability}/{upstream}/``;
the URLs come from ``Stack``'s methods, the one place that asks the proxy for a
run's capabilities, and ``Stack.revoke`` ends them when the run closes. Every
upstream the stack starts answers only requests carrying the stack's key, which
the proxy adds (``fae.util.credentials``). With ``processes=2`` the embedded FHIR
server and the MCP servers run in a child process (``fae.harness.upstream_process``),
so the proxy, the writer and the agents have this process's core to themselves.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx

from fae.errors import FaeError, RecordError
from fae.harness.config import StackConfig
from fae.harness.upstream_apps import (
    actor_identities,
    check_memory_stores,
    extra_mcp_names,
    fhir_app,
    mcp_apps,
    memory_app_factory,
    memory_upstream_name,
    parse_memory_stores,
    sandbox_id,
)
from fae.harness.upstream_process import UpstreamProcess, upstream_process
from fae.proxy.routes import Upstream
from fae.proxy.server import ProxyHandle, run_proxy
from fae.recorder.recorder import Recorder
from fae.store.live import LiveQueryServer
from fae.store.log import EventLog
from fae.store.sandbox import Budget
from fae.store.writer import LogWriter, open_writer
from fae.util.credentials import KEY_HEADER, new_stack_key, require_stack_key
from fae.util.loop_errors import quiet_cancellations
from fae.util.serve import serve_asgi

__all__ = [
    "Stack",
    "actor_identities",
    "memory_app_factory",
    "memory_upstream_name",
    "open_stack",
    "parse_memory_stores",
    "sandbox_id",
]


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
    child: UpstreamProcess | None = field(default=None, repr=False)
    """The child process serving the FHIR and MCP servers (``processes=2``), or None when they run here; once it has
    ended, the upstreams it served are down, though another process may since listen on a port of theirs."""
    stack_key: str = field(default="", repr=False)
    """The key the stack's own upstreams require (the proxy adds it); see ``direct_fhir``."""
    agent_upstream_names: frozenset[str] = frozenset()
    """Upstreams that are agents' own servers (an A2A agent): reached with the agent's capability, their faults
    the agent's."""

    @property
    def upstream_pid(self) -> int | None:
        return self.child.pid if self.child is not None else None

    def fhir_base(self, run_id: str, actor: str) -> str:
        """The proxied FHIR base a client uses in ``run_id`` as ``actor``."""
        if self.embedded:
            return self.proxy.url(run_id, actor, "fhir", f"sandbox/{sandbox_id(run_id)}/fhir")
        return self.proxy.url(run_id, actor, "fhir")

    def fhir_root(self, run_id: str, actor: str) -> str:
        """The FHIR server's root through the proxy: its admin routes (``sandbox``), for the harness's actors only."""
        return self.proxy.url(run_id, actor, "fhir")

    def direct_fhir(self, run_id: str) -> tuple[str, dict[str, str]] | None:
        """The run's FHIR base on the server itself, bypassing the proxy, and the headers it takes there (the
        stack key, on the embedded server): for fae's scripted scenarios' unrecorded writes, never an agent's."""
        upstream = self.proxy.upstreams.get("fhir")
        if upstream is None:
            return None
        if self.embedded:
            return f"{upstream.base_url.rstrip('/')}/sandbox/{sandbox_id(run_id)}/fhir", {KEY_HEADER: self.stack_key}
        return upstream.base_url, {}

    def revoke(self, run_id: str) -> None:
        """Every URL the run was given stops working: called when the run has closed."""
        self.proxy.revoke(run_id)

    def mcp_url(self, run_id: str, actor: str = "agent") -> str:
        return self.proxy.url(run_id, actor, "mcp-fhir", "mcp")

    def llm_base(self, run_id: str, actor: str = "agent") -> str | None:
        return self.proxy.url(run_id, actor, "llm", "v1").rstrip("/") if self.llm_upstream else None

    async def unreachable(self, timeout_s: float = 5.0) -> str | None:
        """The first part of the stack that accepts no connection (proxy, FHIR, MCP servers), or None.

        The LLM and the agents' own servers are left out: their faults are the agent's.
        """
        served = self.child.servers if self.child is not None else {}
        parts = [("the recording proxy", self.proxy.base_url, False)] + [
            (f"the {name} upstream", upstream.base_url, name in served)
            for name, upstream in self.proxy.upstreams.items()
            if upstream.kind != "llm" and name not in self.agent_upstream_names
        ]
        for part, base, in_child in parts:
            url = httpx.URL(base)
            port = url.port or (443 if url.scheme == "https" else 80)
            if in_child and self.child is not None and self.child.ended():  # its port may be another's by now
                return f"{part} ({url.host}:{port}, its process ended)"
            try:
                with anyio.fail_after(timeout_s):
                    stream = await anyio.connect_tcp(url.host, port)
            except (OSError, TimeoutError):
                return f"{part} ({url.host}:{port})"
            await stream.aclose()
        return None

    def agent_upstreams(self, run_id: str, names: Iterable[str], actor: str = "agent") -> dict[str, str]:
        """Proxied URLs of an agent's own servers (``open_stack(agent_upstreams=...)``) among ``names``."""
        return {name: self.proxy.url(run_id, actor, name) for name in names if name in self.agent_upstream_names}

    def extra_mcp(self, run_id: str, actor: str = "agent") -> dict[str, str]:
        """Proxied URLs of the extra MCP servers (``specs``, ``memory:NAME``) for ``AgentContext.extra_mcp``."""
        return {
            name: self.proxy.url(run_id, actor, upstream, "mcp") for name, upstream in self.extra_mcp_upstreams.items()
        }


@asynccontextmanager
async def open_stack(
    log_path: str | Path,
    config: StackConfig | None = None,
    *,
    llm_app: Any | None = None,
    fhir_engine: Any | None = None,
    agent_upstreams: Mapping[str, str] | None = None,
) -> AsyncIterator[Stack]:
    """Start everything a recording needs (``config``: ``fae.harness.config.StackConfig``); yields when all of it
    is listening.

    ``llm_app``: an OpenAI-compatible ASGI app (fae's scripted LLM server, a replay's cassette) served
    by the stack as its LLM, which then answers only the proxy, as the FHIR and MCP servers do; a
    ``config.llm_url`` is someone else's server, reached as it is.
    ``fhir_engine`` is the embedded server's engine when the caller needs its own (``fae replay``
    passes one that hands out the recorded resource ids); it is always served in this process.
    ``agent_upstreams``: servers the agents talk to themselves (``fae.agents.base.declared_upstreams``: an A2A
    agent's), name → base URL, put behind the proxy as plain HTTP upstreams, recorded byte for byte.
    With ``config.audit_events`` the harness reads each run's AuditEvent trail back through the proxy after
    the run. ``config.processes`` 2 serves the embedded FHIR server and the MCP servers in a child process
    (``fae.harness.upstream_process``); 1 or None keeps them in this process.
    """
    config = config or StackConfig()
    fhir_url, llm_url, audit_events = config.fhir_url, config.llm_url, config.audit_events
    processes = config.processes or 1
    if llm_url and llm_app is not None:
        raise FaeError("give the stack an LLM URL or an LLM app to serve, not both")
    key = new_stack_key()
    stores = dict(config.memory_stores)
    check_memory_stores(stores)
    embedded = fhir_url is None
    quiet_cancellations(asyncio.get_running_loop())  # the proxy's closing connections, until the loop closes
    async with AsyncExitStack() as stack:
        servers: dict[str, tuple[str, int]] = {}
        child: UpstreamProcess | None = None
        if processes == 2:
            # started first: the child's imports overlap with this process opening the log
            child = await stack.enter_async_context(
                upstream_process(
                    serve_fhir=embedded and fhir_engine is None,
                    embedded=embedded,
                    key=key,
                    audit_events=audit_events,
                    memory_stores=stores,
                )
            )
            servers = dict(child.servers)
        budget = Budget()
        log = stack.enter_context(EventLog(log_path, settings=budget.settings))
        stack.enter_context(LiveQueryServer(log, budget))
        writer = await stack.enter_async_context(open_writer(log, fsync=config.fsync))
        apps: dict[str, tuple[str, Any]] = {}
        if embedded and "fhir" not in servers:
            apps["fhir"] = ("fhir", fhir_app(fhir_engine, audit_events=audit_events, key=key))
        if processes == 1:
            apps.update(mcp_apps(embedded=embedded, memory_stores=stores, key=key))
        if llm_app is not None:
            apps["llm"] = ("llm", require_stack_key(llm_app, key))
        for name, (kind, app) in apps.items():
            servers[name] = (kind, await stack.enter_async_context(serve_asgi(app)))
        upstreams = {
            name: Upstream(name, f"http://127.0.0.1:{port}", kind, embedded=True)
            for name, (kind, port) in servers.items()
        }
        if fhir_url is not None:
            upstreams["fhir"] = Upstream("fhir", fhir_url.rstrip("/"), "fhir")
        if llm_url:
            upstreams["llm"] = Upstream("llm", llm_url.rstrip("/").removesuffix("/v1"), "llm")
        for name, url in (agent_upstreams or {}).items():
            if name in upstreams:
                raise FaeError(f"an agent's server may not be named {name!r}: the stack's own upstream is")
            upstreams[name] = Upstream(name, url, "http")
        try:
            proxy = await stack.enter_async_context(
                run_proxy(
                    upstreams, Recorder(writer, config.redactor()), max_body_bytes=config.max_body_bytes, stack_key=key
                )
            )
        except OSError as exc:
            raise RecordError(f"the recording proxy could not start: {exc}") from None
        yield Stack(
            log=log,
            writer=writer,
            proxy=proxy,
            embedded=embedded,
            llm_upstream=bool(llm_url) or llm_app is not None,
            extra_mcp_upstreams=extra_mcp_names(stores),
            audit_events=audit_events,
            child=child,
            stack_key=key,
            agent_upstream_names=frozenset(agent_upstreams or ()),
        )
