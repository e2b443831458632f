"""``fae mcp``: serve fae's MCP servers (the lead mounts this app as ``fae mcp``)."""

from __future__ import annotations

from typing import Annotated

import typer

from fae.cli.console import echo, error_line
from fae.errors import FaeError
from fae.mcp.endpoints import FHIR_PORT, SPECS_PORT, TRANSPORT_HELP, Transport

app = typer.Typer(help="Serve fae's MCP servers.", no_args_is_help=True)

HostOption = Annotated[str, typer.Option(help="Address to bind (http, sse).")]


@app.callback()
def _group() -> None:
    """Serve fae's MCP servers."""


def _fail(message: str, code: int = 1) -> typer.Exit:
    error_line(message)
    return typer.Exit(code)


@app.command()
def fhir(
    fhir_base: Annotated[
        str,
        typer.Option(
            "--fhir-base",
            envvar="FAE_FHIR_BASE",
            help="FHIR base URL; may hold {run} and {actor}, filled per call from the "
            "X-Fae-Run / X-Fae-Actor headers (HTTP transports only).",
        ),
    ],
    transport: Annotated[Transport, typer.Option(help=TRANSPORT_HELP)] = Transport.stdio,
    host: HostOption = "127.0.0.1",
    port: Annotated[int, typer.Option(help=f"Port to bind (http, sse); default {FHIR_PORT}.")] = FHIR_PORT,
) -> None:
    """Serve the FHIR CRUD tools (createResource, searchResources, ...) over MCP."""
    if not fhir_base.startswith(("http://", "https://")):
        raise _fail(f"--fhir-base must be an http(s) URL, got {fhir_base!r}", 2)
    from fae.mcp.fhir_server import build_fhir_mcp
    from fae.mcp.transports import serve

    try:
        serve(
            build_fhir_mcp(fhir_base),
            transport,
            host=host,
            port=port,
            announce=lambda where: echo(f"FHIR MCP server on {where} -> {fhir_base}", stderr=True),
        )
    except FaeError as exc:
        raise _fail(str(exc)) from None


@app.command()
def specs(
    transport: Annotated[Transport, typer.Option(help=TRANSPORT_HELP)] = Transport.stdio,
    host: HostOption = "127.0.0.1",
    port: Annotated[int, typer.Option(help=f"Port to bind (http, sse); default {SPECS_PORT}.")] = SPECS_PORT,
) -> None:
    """Serve the FHIR R4 specs lookups (listResources, getStructureDefinition, ...) over MCP."""
    from fae.mcp.specs_server import build_specs_mcp
    from fae.mcp.transports import serve

    try:
        serve(
            build_specs_mcp(),
            transport,
            host=host,
            port=port,
            announce=lambda where: echo(f"FHIR specs MCP server on {where}", stderr=True),
        )
    except FaeError as exc:
        raise _fail(str(exc)) from None
