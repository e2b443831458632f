"""How fae's MCP servers are reached over HTTP: streamable HTTP at /mcp, legacy HTTP+SSE at /sse.

Streamable HTTP is stateless with plain JSON answers: each MCP message is one
POST answered by one JSON body, so the recording proxy sees a tool call whole.
The legacy transport (the one the reference study's agents use) holds a GET
/sse stream open per session; the client POSTs messages to /messages/ and the
answers come back on the stream. Behind the recording proxy the stream's
``endpoint`` event must name the proxied path, so the /sse route honours
``X-Forwarded-Prefix`` (the proxy sets it). Host-header checks against DNS
rebinding are off: the servers sit behind our proxy, which may present any
Host; bind them to 127.0.0.1.

A legacy session belongs to the run that opened it: the run the proxy names
(``X-Fae-Run``) is the request's principal, and the SDK answers a message
posted to a session from another principal as if the session did not exist
(404). A session id is in the log, so it must not let one run into another's
session.
"""

from __future__ import annotations

from collections.abc import Callable

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from fae.mcp.endpoints import MESSAGES_PATH, SSE_PATH, STREAMABLE_PATH, Transport, served_at
from fae.util.listen import listen, serve_forever

_PREFIX_HEADER = b"x-forwarded-prefix"
_RUN_HEADER = b"x-fae-run"
_NO_HOST_CHECK = TransportSecuritySettings(enable_dns_rebinding_protection=False)


class _ForwardedPrefix:
    """Serves the SSE stream under the proxy's path prefix, so its endpoint event leads back through the proxy."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        prefix = next(
            (value.decode("latin-1") for key, value in scope.get("headers", ()) if key.lower() == _PREFIX_HEADER), ""
        )
        if prefix.startswith("/") and "?" not in prefix:
            scope = {**scope, "root_path": prefix.rstrip("/") + scope.get("root_path", "")}
        await self.app(scope, receive, send)


class _RunPrincipal:
    """Makes the run the proxy names the request's principal, which the SDK binds a legacy session to."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        run = next((value for key, value in scope.get("headers", ()) if key.lower() == _RUN_HEADER), None)
        if run:
            token = AccessToken(token="", client_id=f"fae-run:{run.decode('latin-1')}", scopes=[])
            scope = {**scope, "user": AuthenticatedUser(token)}
        await self.app(scope, receive, send)


def sse_routes(server: MCPServer) -> list[BaseRoute]:
    """The SDK's legacy transport routes (GET /sse, POST /messages/) for ``server``, each session its run's."""
    legacy = server.sse_app(sse_path=SSE_PATH, message_path=MESSAGES_PATH, transport_security=_NO_HOST_CHECK)
    routes: list[BaseRoute] = []
    for route in legacy.routes:
        if isinstance(route, Route) and route.path == SSE_PATH:
            routes.append(Route(SSE_PATH, endpoint=_RunPrincipal(_ForwardedPrefix(route.app)), methods=["GET"]))
        elif isinstance(route, Mount) and route.path == MESSAGES_PATH.rstrip("/"):
            routes.append(Mount(MESSAGES_PATH, app=_RunPrincipal(route.app)))
        else:
            raise TypeError(f"the MCP SDK's legacy SSE app has a route fae does not know: {route!r}")
    return routes


def http_app(server: MCPServer, *, path: str = STREAMABLE_PATH, sse: bool = True) -> Starlette:
    """``server`` over stateless streamable HTTP at ``path``, and over legacy SSE beside it unless ``sse`` is off.

    The app has a lifespan (the SDK's session manager): serve it with uvicorn,
    or run its lifespan from a parent app that mounts it.
    """
    app = server.streamable_http_app(
        streamable_http_path=path, stateless_http=True, json_response=True, transport_security=_NO_HOST_CHECK
    )
    if sse:
        app.router.routes.extend(sse_routes(server))
    return app


def sse_app(server: MCPServer) -> Starlette:
    """``server`` over the legacy HTTP+SSE transport only: GET /sse and POST /messages/."""
    return Starlette(routes=sse_routes(server))


def serve(
    server: MCPServer,
    transport: Transport,
    *,
    host: str,
    port: int,
    announce: Callable[[str], None] = lambda where: None,
) -> None:
    """Run ``server`` on ``transport`` until interrupted; a bad or busy port is a FaeError before anything runs.

    ``announce`` gets where clients connect, once the port is bound (port 0 takes a free one).
    """
    if transport is Transport.stdio:
        server.run("stdio")
        return
    listener = listen(host, port)
    announce(served_at(transport, host, listener.getsockname()[1]))
    if transport is Transport.sse:
        serve_forever(sse_app(server), listener, lifespan="off")
    else:
        serve_forever(http_app(server), listener)
