"""``fae rejudge`` and ``fae compare``: plain command functions the top-level CLI registers."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from fae.errors import StoreError

out = Console(highlight=False, width=None if sys.stdout.isatty() else 240)

LogOption = Annotated[Path, typer.Option("--log", "-l", help="The DuckDB event log.", envvar="FAE_LOG")]
RunsOption = Annotated[str | None, typer.Option(
    "--runs", help="Only these runs: a run-id glob (rec-*) or key=value[,key=value] with key task, agent, "
                   "status, suite, variation or run.")]

WorkersOption = Annotated[int | None, typer.Option(
    "--workers", "-w", help="Judge on this many processes (default: every core).")]


def rejudge(
    log: LogOption = Path("fae.duckdb"),
    judge: Annotated[str | None, typer.Option("--judge", "-j", help="One judge (default: every default judge).")] = None,
    rule: Annotated[list[str], typer.Option("--rule", "-r", help="A rule as key=value (repeatable).")] = [],
    runs: RunsOption = None,
    workers: WorkersOption = None,
) -> None:
    """Judge recorded runs again from the log alone and append the verdicts (old ones are kept)."""
    from fae.judge.registry import parse_rules
    from fae.judge.rejudge import rejudge as run_rejudge

    result = run_rejudge(log, judge_name=judge, overrides=parse_rules(rule), runs=runs, workers=workers)
    table = Table(title=f"rejudged {result.runs} runs into {log} (batch {result.batch})")
    for column in ("judge", "rule set", "outcome", "runs"):
        table.add_column(column)
    for (name, digest, outcome), count in sorted(result.outcomes.items()):
        table.add_row(name, digest, outcome, str(count))
    out.print(table)


def compare(
    old: Annotated[str, typer.Option("--old", help="Old rules: key=value[,key=value] ('' for defaults).")],
    new: Annotated[str, typer.Option("--new", help="New rules: key=value[,key=value].")],
    log: LogOption = Path("fae.duckdb"),
    judge: Annotated[str | None, typer.Option("--judge", "-j", help="The judge (default: those taking the rules).")] = None,
    runs: RunsOption = None,
    show: Annotated[int, typer.Option(help="List at most this many flipped runs per judge.")] = 50,
    workers: WorkersOption = None,
) -> None:
    """Compare verdicts under old and new rules: outcome changes, flipped runs, harms caught and missed."""
    from fae.judge.compare import compare as run_compare
    from fae.judge.compare import rules_text
    from fae.judge.registry import parse_rules
    from fae.store.live import LogReader

    with LogReader(log) as reader:
        if reader.live:
            raise StoreError(f"log {log} is being recorded; compare it when the recording ends")
        result = run_compare(reader, parse_rules([old] if old else []), parse_rules([new] if new else []),
                             judge_name=judge, runs=runs, log_path=log, workers=workers)
    out.print(f"{result.runs} runs; {result.computed} verdicts judged now (not in the log)")
    for item in result.judges:
        table = Table(title=f"{item.judge}: {rules_text(item.old_rules)} → {rules_text(item.new_rules)}")
        for column in ("old outcome", "new outcome", "runs"):
            table.add_column(column)
        for (before, after), count in sorted(item.transitions.items()):
            table.add_row(before, after, str(count))
        out.print(table)
        if item.flipped:
            flips = Table(title=f"{len(item.flipped)} runs flipped")
            for column in ("run", "old", "new"):
                flips.add_column(column, overflow="fold")
            for run_id, before, after in item.flipped[:show]:
                flips.add_row(run_id, before, after)
            out.print(flips)
        else:
            out.print("no run flipped")
        if item.harms:
            harms = Table(title="against the oracle (old → new)")
            for column in ("agent", "harms caught", "harms missed", "false stops"):
                harms.add_column(column)
            totals = {"caught": [0, 0], "missed": [0, 0], "false_stops": [0, 0]}
            for agent, row in sorted(item.harms.items()):
                harms.add_row(agent, *(f"{row[m][0]} → {row[m][1]}" for m in ("caught", "missed", "false_stops")))
                for measure in totals:
                    totals[measure][0] += row[measure][0]
                    totals[measure][1] += row[measure][1]
            harms.add_row("all", *(f"{totals[m][0]} → {totals[m][1]}" for m in ("caught", "missed", "false_stops")))
            out.print(harms)
