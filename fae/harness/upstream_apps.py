"""The ASGI apps behind the recording proxy (embedded FHIR server, MCP servers), built alike in or out of process.

``fae.harness.stack`` serves them in its own process or has ``fae.harness.upstream_process``
serve them in a child; either way each is a plain HTTP server on 127.0.0.1 that the proxy
forwards to, so nothing downstream can tell where they run.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from fae.errors import FaeError
from fae.fhir.audit import IDENTITY_HEADER
from fae.proxy.routes import proxied_route, sandbox_id
from fae.util.credentials import require_stack_key

_STORE_NAME = re.compile(r"[a-z][a-z0-9-]{0,19}")
# the proxy always listens on the loopback: a forwarded host elsewhere did not come from it


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


def fhir_app(engine: Any | None = None, *, audit_events: bool = False, key: str) -> Any:
    """The embedded FHIR server over ``engine`` (a fresh one by default), each actor audited by name,
    answering only requests that carry the stack ``key`` (the proxy's)."""
    from fae.fhir.app import create_app
    from fae.fhir.engine import FhirEngine

    served: Any = FhirEngine() if engine is None else engine
    if audit_events:
        served.audit_events = True  # every sandbox created from now on keeps a trail
    app: Any = create_app(served)
    return require_stack_key(actor_identities(app) if audit_events else app, key)


def proxied_fhir_base(embedded: bool) -> Callable[[Mapping[str, str]], str]:
    """The FHIR MCP server's base for a tool call: the run's FHIR base back through the proxy it came by.

    The proxy tells each of the stack's upstreams its own address (X-Forwarded-Host), the run,
    the actor and that pair's capability (X-Fae-Run, X-Fae-Actor, X-Fae-Capability), so the MCP
    server needs no handle on the proxy and can run in another process. Only the proxy reaches
    the server (the stack key), and it sets these headers itself, so they can be believed.
    """

    def base_for(headers: Mapping[str, str]) -> str:
        run_id = {k.lower(): v for k, v in headers.items()}.get("x-fae-run", "")
        rest = f"sandbox/{sandbox_id(run_id)}/fhir" if embedded and run_id else ""
        found = proxied_route(headers, "fhir", rest)
        if found is None:
            raise KeyError("the MCP request did not come through the recording proxy (no X-Fae-Run)")
        return found

    return base_for


def memory_app_factory() -> Callable[[Path], Any]:
    """``fae.memory.server.memory_mcp_http_app``, or a FaeError saying it is not installed."""
    try:
        from fae.memory.server import memory_mcp_http_app
    except ImportError as exc:
        raise FaeError(
            "the Reflexion memory MCP server is missing: fae.memory.server.memory_mcp_http_app "
            f"cannot be imported ({exc}); the memory agent configurations need it"
        ) from None
    return memory_mcp_http_app


def check_memory_stores(stores: Mapping[str, Path]) -> None:
    """Every memory store is well named and a directory, and the memory server is installed:
    checked before anything starts."""
    if stores:
        memory_app_factory()
    for store_name, store_dir in stores.items():
        if not _STORE_NAME.fullmatch(store_name):
            raise FaeError(f"memory store name {store_name!r}: use lower-case letters, digits and -")
        if not Path(store_dir).is_dir():
            raise FaeError(f"memory store {store_name!r}: {store_dir} is not a directory")


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


def mcp_apps(*, embedded: bool, memory_stores: Mapping[str, Path], key: str) -> dict[str, tuple[str, Any]]:
    """The MCP servers by proxy upstream name: (upstream kind, ASGI app), each answering only the stack ``key``."""
    from fae.mcp.fhir_server import fhir_mcp_http_app
    from fae.mcp.specs_server import specs_mcp_http_app

    apps: dict[str, tuple[str, Any]] = {
        "mcp-fhir": ("mcp", fhir_mcp_http_app(proxied_fhir_base(embedded))),
        "mcp-specs": ("mcp", specs_mcp_http_app()),
    }
    if memory_stores:
        factory = memory_app_factory()
        for store_name, store_dir in memory_stores.items():
            apps[memory_upstream_name(store_name)] = ("mcp", factory(Path(store_dir)))
    return {name: (kind, require_stack_key(app, key)) for name, (kind, app) in apps.items()}


def extra_mcp_names(memory_stores: Mapping[str, Path]) -> dict[str, str]:
    """The extra MCP servers an agent knows by name (``specs``, ``memory:NAME``) → their proxy upstream."""
    return {"specs": "mcp-specs", **{f"memory:{name}": memory_upstream_name(name) for name in memory_stores}}
