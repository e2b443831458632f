"""`fae fhir`: run the embedded FHIR R4 server."""

from __future__ import annotations

import json
from pathlib import Path

import typer

app = typer.Typer(help="The embedded FHIR R4 server: spec-driven, with isolated sandboxes.",
                  no_args_is_help=True)


@app.callback()
def _group() -> None:
    """The embedded FHIR R4 server."""


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", help="Interface to bind."),
    port: int = typer.Option(8080, min=0, max=65535, help="TCP port (0 picks a free one)."),
    audit_events: bool = typer.Option(False, "--audit-events", help="Keep an AuditEvent per interaction."),
    seed: Path | None = typer.Option(None, help="Seed Bundle (JSON) for the default sandbox."),
) -> None:
    """Serve FHIR at http://HOST:PORT/fhir and sandboxes at /sandbox/{id}/fhir."""
    import uvicorn

    from fae.errors import FhirError
    from fae.fhir.app import DEFAULT_SANDBOX, create_app
    from fae.fhir.engine import FhirEngine

    engine = FhirEngine(audit_events=audit_events)
    if seed is not None:
        try:
            bundle = json.loads(seed.read_text())
            engine.create_sandbox(bundle, DEFAULT_SANDBOX)
        except OSError as exc:
            typer.echo(f"error: cannot read seed {seed}: {exc.strerror}", err=True)
            raise typer.Exit(1) from None
        except ValueError as exc:
            typer.echo(f"error: seed {seed} is not JSON: {exc}", err=True)
            raise typer.Exit(1) from None
        except FhirError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from None
    try:
        uvicorn.run(create_app(engine), host=host, port=port, log_level="warning")
    except OSError as exc:
        typer.echo(f"error: cannot serve on {host}:{port}: {exc.strerror or exc}", err=True)
        raise typer.Exit(1) from None
