"""``fae mcp``: serve fae's MCP servers (the lead mounts this app as ``fae mcp``)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

app = typer.Typer(help="Serve fae's MCP servers.", no_args_is_help=True)


class Transport(StrEnum):
    stdio = "stdio"
    http = "http"


@app.callback()
def _group() -> None:
    """Serve fae's MCP servers."""


@app.command()
def fhir(
    fhir_base: Annotated[
        str,
        typer.Option(
            "--fhir-base",
            envvar="FAE_FHIR_BASE",
            help="FHIR base URL; may hold {run} and {actor}, filled per call from the "
            "X-Fae-Run / X-Fae-Actor headers (HTTP transport only).",
        ),
    ],
    transport: Annotated[
        Transport, typer.Option(help="stdio, or streamable HTTP at /mcp.")
    ] = Transport.stdio,
    host: Annotated[str, typer.Option(help="Address to bind (http).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to bind (http).")] = 8765,
) -> None:
    """Serve the FHIR CRUD tools (createResource, searchResources, ...) over MCP."""
    if not fhir_base.startswith(("http://", "https://")):
        typer.echo(f"error: --fhir-base must be an http(s) URL, got {fhir_base!r}", err=True)
        raise typer.Exit(2)
    if transport is Transport.stdio:
        from fae.mcp.fhir_server import build_fhir_mcp

        build_fhir_mcp(fhir_base).run("stdio")
        return
    import uvicorn

    from fae.mcp.fhir_server import fhir_mcp_http_app

    typer.echo(f"FHIR MCP server on http://{host}:{port}/mcp -> {fhir_base}", err=True)
    uvicorn.run(fhir_mcp_http_app(fhir_base), host=host, port=port, log_level="warning")


@app.command()
def specs(
    transport: Annotated[
        Transport, typer.Option(help="stdio, or streamable HTTP at /mcp.")
    ] = Transport.stdio,
    host: Annotated[str, typer.Option(help="Address to bind (http).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to bind (http).")] = 8766,
) -> None:
    """Serve the FHIR R4 specs lookups (listResources, getStructureDefinition, ...) over MCP."""
    if transport is Transport.stdio:
        from fae.mcp.specs_server import build_specs_mcp

        build_specs_mcp().run("stdio")
        return
    import uvicorn

    from fae.mcp.specs_server import specs_mcp_http_app

    typer.echo(f"FHIR specs MCP server on http://{host}:{port}/mcp", err=True)
    uvicorn.run(specs_mcp_http_app(), host=host, port=port, log_level="warning")
