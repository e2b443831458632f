"""``fae rejudge`` and ``fae compare``: plain command functions the top-level CLI registers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from fae.cli.console import echo, err, out, table
from fae.cli.options import LogOption, RayOption, RunsOption
from fae.cli.progress import progress

WorkersOption = Annotated[
    int | None,
    typer.Option(
        "--workers", "-w", help="Judge on this many processes (default: every core); with --ray, this many shards."
    ),
]
ParquetOption = Annotated[
    Path | None,
    typer.Option(
        "--parquet",
        help="Judge the runs of this `fae export --parquet` directory instead of a log; the verdicts "
        "are added to it as files of their own (--log is not read).",
        show_default=False,
    ),
]


def rejudge(
    log: LogOption = Path("fae.duckdb"),
    judge: Annotated[
        str | None, typer.Option("--judge", "-j", help="One judge (default: every default judge).")
    ] = None,
    rule: Annotated[list[str], typer.Option("--rule", "-r", help="A rule as key=value (repeatable).")] = [],
    runs: RunsOption = None,
    chunk: Annotated[
        int | None, typer.Option(min=1, help="Runs a worker reads, judges and spills together (default 512).")
    ] = None,
    workers: WorkersOption = None,
    ray: RayOption = None,
    parquet: ParquetOption = None,
    tasks: Annotated[
        str,
        typer.Option(
            "--tasks",
            help="Judge each run against the task its log keeps (log), or against today's task files (current).",
        ),
    ] = "log",
    full: Annotated[
        bool,
        typer.Option(
            "--full",
            help="Judge every run by every judge again; by default a verdict the log already holds under the "
            "same rules and code version stands.",
        ),
    ] = False,
    from_events: Annotated[
        bool,
        typer.Option(
            "--from-events",
            help="Read every run's events; by default a judge whose findings the log keeps (ensure_record) decides "
            "from them without reading the run. For a log you did not record yourself, with --full.",
        ),
    ] = False,
) -> None:
    """Judge recorded runs again from the log alone and append the verdicts (old ones are kept)."""
    from fae import api

    with progress("rejudging", 0) as step:
        seen = [0]

        def report(judged: int, planned: int) -> None:
            step(judged - seen[0], total=planned)
            seen[0] = judged

        result = api.rejudge(
            log,
            parquet=parquet,
            judge_name=judge,
            rules=rule,
            runs=runs,
            chunk=chunk,
            workers=workers,
            ray=ray,
            on_progress=report,
            tasks=tasks,
            full=full,
            from_events=from_events,
        )
    print_rejudged(result, parquet or log, tasks=tasks)


def judge_defaults(name: str) -> dict[str, Any] | None:
    """A judge's default rules, None for a judge not installed here (its rule set is then shown whole)."""
    from fae.errors import JudgeError
    from fae.judge.registry import get_judge

    try:
        return {key: rule.default for key, rule in get_judge(name.split("~", 1)[0]).rules.items()}
    except JudgeError:
        return None


def print_rejudged(result: Any, log: Path, *, tasks: str = "log") -> None:
    """The table ``fae rejudge`` prints: verdict counts per judge, rule set (by the rules it changes) and outcome."""
    from fae.report.rule_sets import rule_set_label

    named = {
        (name, digest): rule_set_label(rules, digest, defaults=judge_defaults(name))
        for (name, digest), rules in result.rule_sets.items()
    }
    stood = sum(getattr(result, "stood", {}).values())
    if stood:
        out.print(
            f"rejudged {result.runs} of {result.considered} runs into {log} (batch {result.batch}); "
            f"{stood} verdict(s) stood: same rules and code version as the log's (--full judges them again)"
        )
    else:
        out.print(f"rejudged {result.runs} runs into {log} (batch {result.batch})")
    from_facts = getattr(result, "from_facts", 0)
    if from_facts:
        out.print(
            f"{from_facts} of them decided from the findings the log keeps, without reading their events "
            "(--from-events reads them)"
        )
    shown = table(["judge", "rule set", "outcome", "runs"])
    for (name, digest, outcome), count in sorted(result.outcomes.items()):
        shown.add_row(name, named.get((name, digest), f"({digest[:8]})"), outcome, str(count))
    out.print(shown)
    other_task = max(
        (count for (_, _, outcome), count in result.outcomes.items() if outcome == "task_changed"), default=0
    )
    if tasks == "current":
        out.print(
            f"judged against today's task files (--tasks current): {other_task} of {result.runs} run(s) played "
            "another rendering of their task than these files give.",
            markup=False,
            soft_wrap=True,
        )
    elif other_task:
        out.print(
            f"{other_task} run(s) played another rendering of their task than this fae renders (a task file, "
            "scenario file or fae itself changed since they were recorded): the judges that read the task "
            "gave them task_changed, which is not scored. Judge them with the fae and task files they were "
            "recorded with (docs/judging.md).",
            soft_wrap=True,
        )


def compare(
    old: Annotated[str, typer.Option("--old", help="Old rules: key=value[,key=value] ('' for defaults).")],
    new: Annotated[str, typer.Option("--new", help="New rules: key=value[,key=value].")],
    log: LogOption = Path("fae.duckdb"),
    judge: Annotated[
        str | None, typer.Option("--judge", "-j", help="The judge (default: those taking the rules).")
    ] = None,
    runs: RunsOption = None,
    show: Annotated[int, typer.Option(help="List at most this many flipped runs per judge.")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON.")] = False,
    workers: WorkersOption = None,
    ray: RayOption = None,
    parquet: Annotated[
        Path | None,
        typer.Option(
            "--parquet",
            help="Compare the runs and verdicts of this `fae export --parquet` directory instead of a "
            "log (--log is not read).",
            show_default=False,
        ),
    ] = None,
    from_events: Annotated[
        bool,
        typer.Option(
            "--from-events",
            help="Judge every verdict the log lacks from the run's events; by default a judge whose findings the "
            "log keeps (ensure_record) decides from them.",
        ),
    ] = False,
) -> None:
    """Compare verdicts under old and new rules: outcome changes, flipped runs, harms caught and missed."""
    from fae import api

    result = api.compare(
        log, old, new, judge_name=judge, runs=runs, workers=workers, ray=ray, parquet=parquet, from_events=from_events
    )
    if as_json:
        from fae.judge.compare import as_json as comparison_json

        echo(json.dumps(comparison_json(result), indent=2, sort_keys=True))
        return
    print_comparison(result, show)


def computed_line(result: Any) -> str:
    """How many runs were compared, and whether each verdict was read from the log or judged now."""
    if not result.computed:
        return f"{result.runs} runs compared; every verdict was read from the log (none had to be judged now)"
    return (
        f"{result.runs} runs compared; {result.computed} verdicts were not in the log for this version of fae's "
        "judges and were judged now (not written: `fae rejudge` writes them)"
    )


def print_comparison(result: Any, show: int) -> None:
    """The tables ``fae compare`` prints: transitions, flipped runs, harms against the oracle."""
    from fae.judge.registry import rule_set_hash
    from fae.report.rule_sets import rule_set_label

    for batch, judged, planned in result.incomplete_batches:
        err.print(
            f"warning: verdict batch {batch} is incomplete ({judged} of {planned} runs judged; its "
            f"rejudge stopped before the end): its verdicts are left out and those runs judged now",
        )
    out.print(computed_line(result))
    for item in result.judges:
        defaults = judge_defaults(item.judge)
        old = rule_set_label(item.old_rules, rule_set_hash(item.old_rules), defaults=defaults)
        new = rule_set_label(item.new_rules, rule_set_hash(item.new_rules), defaults=defaults)
        out.print()
        out.print(f"{item.judge}: {old} → {new}")  # on its own line: wrapped at spaces, never inside a word
        transitions = table(["old outcome", "new outcome", "runs"])
        for (before, after), count in sorted(item.transitions.items()):
            transitions.add_row(before, after, str(count))
        out.print(transitions)
        if item.flipped:
            flips = table(
                ["run", "old", "new"], title=f"{len(item.flipped)} run{'s' if len(item.flipped) != 1 else ''} flipped"
            )
            for run_id, before, after in item.flipped[:show]:
                flips.add_row(run_id, before, after)
            out.print(flips)
        else:
            out.print("no run flipped")
        if item.case_harms:
            harms = table(
                ["case set", "agent", "harms caught", "harms missed", "false stops"],
                title="against the oracle (old → new)",
            )
            totals = {"caught": [0, 0], "missed": [0, 0], "false_stops": [0, 0]}
            for (cases, agent), row in sorted(item.case_harms.items()):
                harms.add_row(
                    cases, agent, *(f"{row[m][0]} → {row[m][1]}" for m in ("caught", "missed", "false_stops"))
                )
                for measure in totals:
                    totals[measure][0] += row[measure][0]
                    totals[measure][1] += row[measure][1]
            harms.add_row("all", "", *(f"{totals[m][0]} → {totals[m][1]}" for m in ("caught", "missed", "false_stops")))
            out.print(harms)
