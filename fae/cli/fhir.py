"""`fae fhir`: run the embedded FHIR R4 server."""

from __future__ import annotations

import errno
import socket
from pathlib import Path

import typer

from fae.cli.console import echo, error_line

app = typer.Typer(help="The embedded FHIR R4 server: spec-driven, with isolated sandboxes.", no_args_is_help=True)


@app.callback()
def _group() -> None:
    """The embedded FHIR R4 server."""


def _bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port, or one clear error line and exit 1."""
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            reason = "the port is already in use (pick another with --port, or 0 for a free one)"
        else:
            reason = exc.strerror or str(exc)
        error_line(f"cannot serve on {host}:{port}: {reason}")
        raise typer.Exit(1) from None
    return sock


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", help="Interface to bind."),
    port: int = typer.Option(8080, min=0, max=65535, help="TCP port (0 picks a free one)."),
    audit_events: bool = typer.Option(False, "--audit-events", help="Keep an AuditEvent per interaction."),
    seed: Path | None = typer.Option(None, help="Seed Bundle (JSON) for the default sandbox."),
    request_budget: float = typer.Option(
        30.0, min=0.0, help="Seconds a request may run before it answers 503 and changes nothing (0: no limit)."
    ),
    max_entries: int = typer.Option(10_000, min=1, help="Most entries in one Bundle (posted or seed)."),
) -> None:
    """Serve FHIR at http://HOST:PORT/fhir and sandboxes at /sandbox/{id}/fhir."""
    import uvicorn

    from fae.errors import FaeError
    from fae.fhir.app import DEFAULT_SANDBOX, create_app
    from fae.fhir.engine import MAX_BODY, FhirEngine
    from fae.util.data_files import read_json

    engine = FhirEngine(audit_events=audit_events, request_budget_s=request_budget or None, max_entries=max_entries)
    if seed is not None:
        try:
            bundle = read_json(seed, max_bytes=MAX_BODY)
            engine.create_sandbox(bundle, DEFAULT_SANDBOX)
        except OSError as exc:
            error_line(f"cannot read seed {seed}: {exc.strerror}")
            raise typer.Exit(1) from None
        except ValueError as exc:
            error_line(f"seed {seed} is not JSON: {str(exc)[:200]}")
            raise typer.Exit(1) from None
        except FaeError as exc:  # the engine refused the bundle, or the file is over the parsing limits
            error_line(exc)
            raise typer.Exit(1) from None
    sock = _bind(host, port)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    echo(f"fae fhir: serving FHIR R4 at http://{shown}:{bound}/fhir (sandboxes at /sandbox)")
    server = uvicorn.Server(uvicorn.Config(create_app(engine), log_level="warning", lifespan="off"))
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
