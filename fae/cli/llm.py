"""``fae llm``: run the local OpenAI-compatible server of scripted behaviours."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fae.cli.console import echo, error_line
from fae.errors import FaeError
from fae.util.limits import MAX_FAULT_DELAY_S

app = typer.Typer(help="A local OpenAI-compatible server that plays scripted behaviours.", no_args_is_help=True)


@app.callback()
def main() -> None:
    """A local OpenAI-compatible server that plays scripted behaviours."""


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8700,
    plans: Annotated[
        Path | None,
        typer.Option(help="Directory of plan files (.yaml/.yml/.json) to register at start."),
    ] = None,
    suite: Annotated[
        bool,
        typer.Option(help="Play the task suite's gold plans for suite prompts no registered plan matches."),
    ] = True,
    fault_delay: Annotated[
        float,
        typer.Option(help=f"Seconds fault:timeout waits before a 504 (at most {MAX_FAULT_DELAY_S:g})."),
    ] = 30.0,
) -> None:
    """Serve /v1/chat/completions, /v1/responses, /v1/embeddings and /v1/models on HOST:PORT."""
    from fae.llm.app import MODELS, create_app  # starlette and the suite load only when serving
    from fae.llm.plan_registry import PlanRegistry, load_plans_dir
    from fae.llm.suite_plans import SuitePlans
    from fae.util.listen import listen, serve_forever

    try:
        fallback = SuitePlans().find if suite else None
        registry = load_plans_dir(plans, fallback=fallback) if plans is not None else PlanRegistry(fallback=fallback)
        if not 0 <= fault_delay <= MAX_FAULT_DELAY_S:
            raise FaeError(f"--fault-delay must be between 0 and {MAX_FAULT_DELAY_S:g} seconds")
    except FaeError as exc:
        error_line(exc)
        raise typer.Exit(1) from None
    try:
        listener = listen(host, port)
    except FaeError as exc:
        error_line(exc)
        raise typer.Exit(1) from None
    server_app = create_app(registry, fault_delay_s=fault_delay)
    echo(
        f"fae llm: OpenAI base URL http://{host}:{listener.getsockname()[1]}/v1, "
        f"{len(registry.entries())} plans{' + the suite' if suite else ''}, "
        f"models: {', '.join(MODELS)}",
        stderr=True,
    )
    serve_forever(server_app, listener, lifespan="off")
