"""``fae stats``, ``fae report`` and ``fae experiment run``: thin commands over fae.report and the harness."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from fae.errors import FaeError

LogOption = Annotated[Path, typer.Option("--log", "-l", help="The DuckDB event log.", envvar="FAE_LOG")]
ExperimentOption = Annotated[str | None, typer.Option("--experiment", "-e", help="Only this experiment's runs.")]
PhaseOption = Annotated[str | None, typer.Option(help="Only this phase's runs (train or eval).")]
PriceOption = Annotated[list[str], typer.Option(
    "--price", help="MODEL=IN/OUT: USD per million prompt and completion tokens (repeatable).")]
PairOption = Annotated[list[str], typer.Option(
    "--pair", help="A,B: compare these two configurations (repeatable; default every pair).")]


def _console() -> Console:
    """Stdout at the terminal's width, or 100 columns when piped."""
    width = shutil.get_terminal_size((100, 24)).columns if sys.stdout.isatty() else 100
    return Console(highlight=False, width=width)


def _options(price: list[str], pair: list[str]) -> tuple[dict, list[tuple[str, str]] | None]:
    from fae.report.study import parse_price

    prices = dict(parse_price(p) for p in price)
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
    price: PriceOption = [],
    pair: PairOption = [],
    table: Annotated[list[str], typer.Option("--table", "-t", help="Only this table (repeatable).")] = [],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON: every table with its SQL.")] = False,
    as_csv: Annotated[bool, typer.Option("--csv", help="Print CSV, one block per table.")] = False,
) -> None:
    """Success rates with spread, pass^k, variance, paired tests, errors, failure modes, tokens, cost."""
    from fae.report.scope import Scope
    from fae.report.source import study_log
    from fae.report.study import compute_study
    from fae.report.text import as_csv as csv_text, as_json as json_text, rich_table

    prices, pairs = _options(price, pair)
    with study_log(log) as source:
        study = compute_study(source, Scope(experiment, phase), prices=prices, pairs=pairs)
    unknown = [name for name in table if name not in study.tables]
    if unknown:
        raise FaeError(f"no table {unknown[0]!r}; tables: {', '.join(study.tables)}")
    chosen = [t for t in study.tables.values() if not table or t.name in table]
    if as_json:
        sys.stdout.write(json_text(chosen) + "\n")
        return
    if as_csv:
        sys.stdout.write("\n".join(f"# {t.name}: {t.title}\n{csv_text(t)}" for t in chosen))
        return
    console = _console()
    for found in chosen:
        if found.rows:
            console.print(rich_table(found))
            console.print()


def report(
    log: LogOption = Path("fae.duckdb"),
    output: Annotated[Path, typer.Option("--output", "-o", help="The HTML file to write.")] = Path("report.html"),
    experiment: ExperimentOption = None,
    phase: PhaseOption = None,
    price: PriceOption = [],
    pair: PairOption = [],
) -> None:
    """Write one self-contained HTML page: figures, tables, and the SQL behind each (works from file://)."""
    from fae.report.html import write_report
    from fae.report.scope import Scope
    from fae.report.source import study_log
    from fae.report.study import compute_study

    prices, pairs = _options(price, pair)
    with study_log(log) as source:
        study = compute_study(source, Scope(experiment, phase), prices=prices, pairs=pairs)
        write_report(source, study, output, log_name=log.name)
    _console().print(f"wrote {output}", markup=False)
