"""``fae stats``, ``fae report`` and ``fae experiment run``: thin commands over fae.report and the harness."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from fae.cli.console import screen, write
from fae.cli.guard import user_errors
from fae.cli.progress import steps
from fae.errors import FaeError

LogOption = Annotated[Path, typer.Option("--log", "-l", help="The DuckDB event log.", envvar="FAE_LOG")]
ExperimentOption = Annotated[str | None, typer.Option("--experiment", "-e", help="Only this experiment's runs.")]
PhaseOption = Annotated[str | None, typer.Option(help="Only this phase's runs (train or eval).")]
PooledOption = Annotated[
    bool,
    typer.Option(
        "--pooled",
        help="One group per configuration over every experiment and phase in scope (the reference paper pools"
        " its four experiments); default: one per experiment and phase.",
    ),
]
PriceOption = Annotated[
    list[str],
    typer.Option(
        "--price",
        help="MODEL=IN/OUT[/CACHED]: USD per million prompt, completion (and cached prompt) tokens, over the "
        "price table (repeatable).",
    ),
]
PricesOption = Annotated[
    list[Path],
    typer.Option(
        "--prices",
        help="A price table (YAML or JSON, the format of fae/report/prices.yaml): its models' prices replace "
        "fae's dated list prices (repeatable).",
    ),
]
PairOption = Annotated[
    list[str], typer.Option("--pair", help="A,B: compare these two configurations (repeatable; default every pair).")
]


def _options(price: list[str], prices_file: list[Path], pair: list[str]) -> tuple[Any, list[tuple[str, str]] | None]:
    from fae.report.prices import parse_price, price_table

    prices = price_table(prices_file, dict(parse_price(p) for p in price))
    pairs = []
    for text in pair:
        a, sep, b = text.partition(",")
        if not sep or not a or not b:
            raise FaeError(f"--pair {text!r} is not A,B (two configurations)")
        pairs.append((a.strip(), b.strip()))
    return prices, pairs or None


def stats(
    log: LogOption = Path("fae.duckdb"),
    experiment: ExperimentOption = None,
    phase: PhaseOption = None,
    pooled: PooledOption = False,
    price: PriceOption = [],
    prices_file: PricesOption = [],
    pair: PairOption = [],
    table: Annotated[list[str], typer.Option("--table", "-t", help="Only this table (repeatable).")] = [],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON: every table with its SQL.")] = False,
    as_csv: Annotated[bool, typer.Option("--csv", help="Print CSV, one block per table.")] = False,
) -> None:
    """Success rates with spread, pass^k, variance, paired tests, errors, failure modes, tokens, cost."""
    from fae.report.commands import study as compute
    from fae.report.text import as_csv as csv_text
    from fae.report.text import as_json as json_text
    from fae.report.text import rich_table

    prices, pairs = _options(price, prices_file, pair)
    with steps("stats") as on_step:
        study = compute(
            log,
            experiment=experiment,
            phase=phase,
            pooled=pooled,
            prices=prices,
            pairs=pairs,
            tables=table or None,
            on_step=on_step,
        )
    chosen = [t for t in study.tables.values() if not table or t.name in table]
    if as_json:
        write(json_text(chosen) + "\n")
        return
    if as_csv:
        write("\n".join(f"# {t.name}: {t.title}\n{csv_text(t)}" for t in chosen))
        return
    console = screen()
    for found in chosen:
        if found.rows:
            console.print(rich_table(found, console.width))
            console.print()


def report(
    log: LogOption = Path("fae.duckdb"),
    output: Annotated[Path, typer.Option("--output", "-o", help="The HTML file to write.")] = Path("report.html"),
    experiment: ExperimentOption = None,
    phase: PhaseOption = None,
    pooled: PooledOption = False,
    price: PriceOption = [],
    prices_file: PricesOption = [],
    pair: PairOption = [],
) -> None:
    """Write one self-contained HTML page: figures, tables, and the SQL behind each (works from file://)."""
    from fae.report.commands import report as write

    prices, pairs = _options(price, prices_file, pair)
    with steps("report") as on_step:
        write(
            log, output, experiment=experiment, phase=phase, pooled=pooled, prices=prices, pairs=pairs, on_step=on_step
        )
    screen().print(f"wrote {output}")


experiment_app = typer.Typer(
    help="Experiments as data: train memory stores, then evaluate configurations.", no_args_is_help=True
)


@experiment_app.command("list")
@user_errors
def experiment_list() -> None:
    """The built-in experiment presets."""
    from fae.harness.experiment_phases import load_experiment, presets

    console = screen()
    for name in presets():
        console.print(f"{name}  {load_experiment(name).description}")


@experiment_app.command("run")
@user_errors
def experiment_run(
    experiment: Annotated[str, typer.Argument(help="An experiment YAML file, or a preset: exp1..exp4.")],
    log: LogOption = Path("fae.duckdb"),
    resume: Annotated[bool, typer.Option(help="Continue an interrupted experiment; done runs are kept.")] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the phases and their size; record nothing.")
    ] = False,
    tasks: Annotated[
        int | None, typer.Option(help="Only the first N tasks of each phase (taken in turn from each family).")
    ] = None,
    trials: Annotated[int | None, typer.Option(help="Trials per evaluated variation (default: the file's).")] = None,
    agent: Annotated[
        list[str], typer.Option("--agent", "-a", help="Configurations to evaluate instead (repeatable).")
    ] = [],
    model: Annotated[
        str | None, typer.Option(help="The agents' model (default: the file's).", envvar="FAE_MODEL")
    ] = None,
    paraphrase_model: Annotated[
        str | None, typer.Option(help="The paraphrase model (where the file paraphrases).")
    ] = None,
    paraphrases: Annotated[
        Path | None,
        typer.Option(
            "--paraphrases", help="A paraphrase file to play (where the file paraphrases) instead of asking the model."
        ),
    ] = None,
    training_model: Annotated[
        str | None, typer.Option(help="The training actor's model (default: the file's; --model sets it too).")
    ] = None,
    embedder: Annotated[
        str | None,
        typer.Option(help="The memory stores' embedding model: static, hashed-bow or openai:MODEL (via --llm-url)."),
    ] = None,
    evaluator_model: Annotated[str | None, typer.Option(help="Reflexion evaluator model.")] = None,
    reflector_model: Annotated[str | None, typer.Option(help="Reflexion reflector model.")] = None,
    llm_url: Annotated[str | None, typer.Option(help="OpenAI-compatible base URL.", envvar="OPENAI_BASE_URL")] = None,
    api_key: Annotated[
        str | None, typer.Option(help="API key for the LLM endpoint.", envvar="OPENAI_API_KEY", show_default=False)
    ] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="Evaluation runs at once.")] = 4,
) -> None:
    """Train the two memory stores, then evaluate every configuration; every run carries experiment and phase."""
    import functools

    import anyio
    from rich.table import Table as RichTable

    from fae.harness.experiment import run_experiment
    from fae.harness.experiment_phases import experiment_phases, load_experiment, with_overrides

    chosen = with_overrides(
        load_experiment(experiment),
        tasks=tasks,
        trials=trials,
        agents=agent,
        model=model,
        paraphrase_model=paraphrase_model,
        paraphrases=str(paraphrases) if paraphrases else None,
        evaluator_model=evaluator_model,
        reflector_model=reflector_model,
        training_model=training_model,
        embedder=embedder,
    )
    console = screen()
    phases = experiment_phases(chosen)
    table = RichTable(title=f"experiment {chosen.name}: {chosen.description}", title_justify="left")
    for column in ("phase", "tasks", "variations", "agents", "trials", "runs (at most)", "paraphrased"):
        table.add_column(column)
    for phase in phases:
        table.add_row(
            phase.phase,
            str(len(phase.tasks)),
            ",".join(map(str, phase.variations)),
            "\n".join(phase.agents),
            str(phase.trials),
            str(phase.runs),
            "yes" if phase.paraphrased else "no",
        )
    console.print(table)
    console.print(f"{sum(p.runs for p in phases)} runs at most")
    if dry_run:
        return
    result = anyio.run(
        functools.partial(
            run_experiment, log, chosen, llm_url=llm_url, resume=resume, concurrency=concurrency, api_key=api_key
        )
    )
    results_table(log, chosen.name, console)
    if result.statuses.get("failed"):
        raise typer.Exit(2)


def results_table(log: Path, experiment: str | None, console: Console, configurations: list[str] | None = None) -> None:
    """The short results table `fae record` and `fae experiment run` end with."""
    from fae.report.scope import Scope
    from fae.report.source import study_log
    from fae.report.tables import overview
    from fae.report.text import rich_table

    scope = Scope(experiment=experiment)
    with study_log(log) as source:
        table = overview(source, scope)
        _, failed = source.query(
            f"WITH {scope.cte()} SELECT run_id, status, error FROM scope"
            " WHERE status IN ('failed', 'interrupted') ORDER BY run_id"
        )
    if configurations is not None:
        keep = table.columns.index("configuration")
        table.rows = [r for r in table.rows if r[keep] in configurations]
    table.note = f"fae stats --log {log}" + (f" --experiment {experiment}" if experiment else "") + " for the rest"
    console.print(rich_table(table, console.width))
    for run_id, status, error in failed[:5]:
        console.print(f"{status}: {run_id}: {error}", soft_wrap=True)
    if len(failed) > 5:
        console.print(f"... and {len(failed) - 5} more runs that did not finish")
