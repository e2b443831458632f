"""``fae train-memory``: Reflexion training into a memory store, over the recording stack."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated

import typer

from fae.cli.console import err, out, table
from fae.cli.progress import progress
from fae.errors import FaeError
from fae.util.limits import DEFAULT_EMBEDDER_SPEC, MAX_TRIALS, MAX_VARIATIONS


def _ints(text: str) -> list[int]:
    values: list[int] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        lo, _, hi = part.partition("-")
        values.extend(range(int(lo), int(hi) + 1) if hi else [int(lo)])
    return values


def train_memory(
    task: Annotated[list[str], typer.Option("--task", "-t", help="Training task id (repeatable).")],
    store: Annotated[Path, typer.Option("--store", "-s", help="Memory store directory (made if new).")],
    llm_url: Annotated[
        str,
        typer.Option(
            help="OpenAI-compatible base URL for the evaluator and reflector (and an LLM agent).",
            envvar="OPENAI_BASE_URL",
        ),
    ],
    log: Annotated[
        Path, typer.Option("--log", "-l", help="The DuckDB event log the training runs go to.", envvar="FAE_LOG")
    ] = Path("fae.duckdb"),
    agent: Annotated[
        str, typer.Option("--agent", "-a", help="The acting agent: gold, plan:PATH, langchain:CONFIG[@MODEL].")
    ] = "gold",
    variations: Annotated[str, typer.Option(help="Variations, at most two are used, e.g. 0,1.")] = "0,1",
    trials: Annotated[int, typer.Option(min=1, max=MAX_TRIALS, help="Trials per variation; stops on a pass.")] = 2,
    evaluator_model: Annotated[str, typer.Option(help="Evaluator model.")] = "scripted:evaluator",
    reflector_model: Annotated[str, typer.Option(help="Reflector model.")] = "scripted:reflector",
    embedder: Annotated[
        str, typer.Option(help="Embedding backend: static, hashed-bow or openai:MODEL.")
    ] = DEFAULT_EMBEDDER_SPEC,
    embeddings_url: Annotated[
        str | None,
        typer.Option(help="Base URL for an openai:MODEL embedder, asked directly (default: --llm-url, recorded)."),
    ] = None,
    specs: Annotated[bool, typer.Option(help="Ground the reflector in the FHIR R4 specs server.")] = False,
    api_key: Annotated[str | None, typer.Option(help="API key for the LLM endpoint.", envvar="OPENAI_API_KEY")] = None,
) -> None:
    """Reflexion training: run tasks, judge each run, and store the reflections in a memory store."""
    import anyio

    from fae.harness.training import train  # numpy, httpx and the agents load only for this command
    from fae.memory.embeddings import embedder_from_spec

    try:
        chosen = _ints(variations)
    except ValueError:
        raise FaeError(f"--variations {variations!r} is not a list like 0,1") from None
    if len(chosen) > MAX_VARIATIONS:
        err.print(f"note: training uses at most {MAX_VARIATIONS} variations per task: {chosen[:MAX_VARIATIONS]}")
    # an openai:MODEL embedder without its own URL is the LLM upstream's, asked through the recording proxy
    recorded = embedder.startswith("openai:") and not embeddings_url
    backend = None if recorded else embedder_from_spec(embedder, base_url=embeddings_url, api_key=api_key)
    options = {"api_key": api_key} if api_key and agent.startswith("langchain:") else {}
    most = len(task) * min(len(chosen), MAX_VARIATIONS) * trials
    with progress("training (at most)", most, lines=True) as step:
        result = anyio.run(
            functools.partial(
                train,
                log,
                task,
                store_dir=store,
                llm_url=llm_url,
                agent=agent,
                variations=chosen,
                trials=trials,
                evaluator_model=evaluator_model,
                reflector_model=reflector_model,
                embedder=backend,
                embedder_spec=embedder,
                use_specs=specs,
                api_key=api_key,
                llm_options=options,
                warn=err.print,
                on_progress=lambda run_id, status: step(1, f"{run_id}: {status}"),
            )
        )
    shown = table(
        ["run", "status", "strict", "micro", "macro", "grounded"],
        title=f"trained {store} from {len(result.runs)} runs (log {log})",
    )
    for run in result.runs:
        strict = "n/a" if run.passed is None else ("pass" if run.passed else "fail")
        shown.add_row(run.run_id, run.status, strict, str(run.micro), str(run.macro), "yes" if run.grounded else "no")
    out.print(shown)
    stats = result.stats
    out.print(
        f"store: {stats['micro']} micro, {stats['macro']} macro reflections; "
        f"embedding {stats['embedding']['name']} ({stats['embedding']['dimension']}-d), index {stats['index']}",
    )
