"""The `fae` command line. The one place that wires every part together."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from fae.cli.console import echo, err, error_line, line, out, print_rows
from fae.cli.curate import curate as _curate
from fae.cli.guard import user_error, user_errors
from fae.cli.judge import compare as _compare
from fae.cli.judge import rejudge as _rejudge
from fae.cli.options import DEFAULT_LOG, LogOption, RayOption, RunsOption
from fae.cli.progress import progress, steps
from fae.cli.replay import replay as _replay
from fae.cli.runs import runs as _runs
from fae.cli.training import train_memory as _train_memory
from fae.errors import FaeError
from fae.harness.interrupt import RESUME_HINT, catch_stop_signals

REJUDGE_STOPPED = (
    "its batch is left started and never completed (`fae compare` leaves it out), and a log gets "
    "none of its verdicts; run it again"
)
EXPORT_STOPPED = (
    "this log's export is marked unfinished (DIR/<log>.unfinished) and readers refuse the directory "
    "until an export of the same log finishes (or `fae export --parquet DIR --drop <log>` takes "
    "its files out)"
)
MIGRATE_STOPPED = "each migration step is applied whole or not at all; `fae migrate` again finishes"

app = typer.Typer(
    help="fae: record, replay and judge LLM agents that act on FHIR servers.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
# piped output is not folded at 80 columns: it is read by scripts and greps


@app.callback()
@user_errors
def _options(
    tasks_dir: Annotated[
        list[Path],
        typer.Option(
            "--tasks-dir",
            help="Load tasks from this directory too (repeatable; also FAE_TASKS_PATH).",
            show_default=False,
        ),
    ] = [],
) -> None:
    """fae: record, replay and judge LLM agents that act on FHIR servers."""
    if not tasks_dir:
        return  # the task package (fhirpathpy with it) loads only for the commands that use tasks
    from fae.tasks.sources import add_task_dir

    for directory in tasks_dir:
        add_task_dir(directory)


def _mount(module: str, name: str, help_text: str) -> None:
    try:
        sub = __import__(module, fromlist=["app"]).app
    except ModuleNotFoundError as exc:
        if exc.name and module.startswith(exc.name):
            return  # that part of fae is not installed in this build
        raise
    app.add_typer(sub, name=name, help=help_text)


_mount("fae.cli.fhir", "fhir", "The embedded FHIR R4 server.")
_mount("fae.cli.mcp", "mcp", "MCP servers: FHIR CRUD (and more).")
_mount("fae.cli.llm", "llm", "The local scripted OpenAI-compatible server.")
_mount("fae.cli.tasks", "tasks", "The task suite.")
_mount("fae.cli.memory", "memory", "The Reflexion memory: serve, show, search.")
app.add_typer(
    __import__("fae.cli.study", fromlist=["experiment_app"]).experiment_app,
    name="experiment",
    help="Experiments as data: train memory stores, then evaluate configurations.",
)
_mount("fae.cli.log", "log", "Log files as a whole: merge the shards of a cluster recording.")
_mount("fae.cli.paraphrase", "paraphrase", "Fixed paraphrases: write a log's to a file another recording loads.")


def _split_ints(text: str) -> list[int]:
    """``0,1`` or ``0-2`` as a list of variations; an empty or backward range is a mistake, not an empty suite."""
    values: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = (int(x) for x in part.split("-", 1))
            if hi < lo:
                raise ValueError(f"{part} runs backwards")
            values.extend(range(lo, hi + 1))
        else:
            values.append(int(part))
    if not values:
        raise ValueError("no variations")
    return values


def _task_ids(tasks: list[str]) -> list[str]:
    if not tasks:
        raise FaeError("name the tasks to record: --task ID (repeatable) or --task all; `fae tasks list` shows them")
    if tasks == ["all"]:
        from fae.tasks import load_suite

        return list(load_suite())
    return tasks


@app.command()
@user_errors(stopped=RESUME_HINT)
def record(
    log: LogOption = DEFAULT_LOG,
    task: Annotated[list[str], typer.Option("--task", "-t", help="Task id (repeatable), or 'all'.")] = [],
    variations: Annotated[str, typer.Option(help="Variations, e.g. 0,1 or 0-2.")] = "0",
    agent: Annotated[
        list[str],
        typer.Option(
            "--agent",
            "-a",
            help="gold, plan:PATH, scenario:NAME, langchain:CONFIG[@MODEL], a2a:URL or cmd:COMMAND LINE "
            "(repeatable; docs/agents.md).",
        ),
    ] = [],
    repeats: Annotated[int, typer.Option(min=1, help="Repeats of each (task, variation, agent).")] = 1,
    concurrency: Annotated[int, typer.Option(min=1, help="Runs at once.")] = 4,
    resume: Annotated[
        bool,
        typer.Option(
            help="Finish an interrupted suite: finished runs and runs that errored on the agent's own fault "
            "are kept; interrupted and failed runs are recorded again."
        ),
    ] = False,
    retry_errored: Annotated[
        bool, typer.Option(help="With --resume, record again runs that errored on the agent's own fault too.")
    ] = False,
    fsync: Annotated[
        bool, typer.Option(help="fsync every journal append before answering (survives power loss; slower).")
    ] = False,
    fhir_url: Annotated[str | None, typer.Option(help="External FHIR base instead of the embedded one.")] = None,
    llm_url: Annotated[str | None, typer.Option(help="OpenAI-compatible base URL.", envvar="OPENAI_BASE_URL")] = None,
    redact_header: Annotated[list[str], typer.Option(help="Another header to redact.")] = [],
    redact_param: Annotated[list[str], typer.Option(help="Another query parameter to redact.")] = [],
    suite: Annotated[str | None, typer.Option(help="A name for this suite.")] = None,
    model: Annotated[
        str | None, typer.Option(help="Model for LLM agents (else @MODEL or FAE_MODEL).", envvar="FAE_MODEL")
    ] = None,
    api_key: Annotated[
        str | None, typer.Option(help="API key for the LLM endpoint.", envvar="OPENAI_API_KEY", show_default=False)
    ] = None,
    memory: Annotated[list[str], typer.Option(help="A Reflexion memory store NAME=DIR (repeatable).")] = [],
    paraphrase_model: Annotated[
        str | None,
        typer.Option(
            help="Reword each task prompt with this model: once per variation, before the runs (through the "
            "proxy, so it is logged), and every run of the variation plays that paraphrase."
        ),
    ] = None,
    paraphrase_seed: Annotated[int, typer.Option(help="Seed of the paraphrase requests.")] = 0,
    paraphrases: Annotated[
        Path | None,
        typer.Option(
            "--paraphrases",
            help="A paraphrase file (`fae paraphrase export`): play its paraphrases instead of asking the model.",
        ),
    ] = None,
    audit_events: Annotated[
        bool,
        typer.Option(
            "--audit-events",
            help="The FHIR server keeps an AuditEvent trail (the embedded one is told to; with --fhir-url, "
            "say so for a server that does); each run's trail is read into the log for "
            "`ensure_record` evidence=trail.",
        ),
    ] = False,
    max_body_mib: Annotated[
        int, typer.Option(min=1, help="Refuse (413, recorded without the body) request bodies over this many MiB.")
    ] = 32,
    settle: Annotated[
        float | None,
        typer.Option(
            "--settle",
            min=0.0,
            help="Seconds the harness waits after the agent's last write before its read-back "
            "(default: ensure_record's settle_s). A rejudge with a larger settle_s is unreadable.",
        ),
    ] = None,
    scenarios_dir: Annotated[
        list[Path],
        typer.Option(
            "--scenarios-dir",
            help="A directory of write-verification scenario files (repeatable; "
            "also FAE_SCENARIOS_PATH; docs/judging.md).",
        ),
    ] = [],
    ray: RayOption = None,
    ray_actors: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="With --ray: this many actors, each with its own stack and log shard "
            "(default: one per CPU of the cluster).",
        ),
    ] = None,
    processes: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=2,
            show_default=False,
            help="2 (default, or FAE_RECORD_PROCESSES): the FHIR and MCP servers run in a second process "
            "(uses two cores); 1: everything in one process (for debugging). With --workers: per worker "
            "(default 1).",
        ),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            min=1,
            show_default=False,
            help="Record in N local worker processes, each with its own stack and log shard, merged into the log at "
            "the end; 1 (default, or FAE_RECORD_WORKERS): in this process (docs/scale.md). --concurrency is "
            "shared among them.",
        ),
    ] = None,
) -> None:
    """Record a suite of (task, variation, agent, repeat) runs through the proxy into the log."""
    # caught before anything starts, so no embedded server or library sees them first
    with catch_stop_signals() as stop:
        from fae import api

        try:
            variation_list = _split_ints(variations)
        except ValueError as exc:
            raise FaeError(f"--variations {variations!r} is not a list like 0,1 or 0-2 ({exc})") from None
        task_ids = _task_ids(task)
        specs = api.run_specs(
            task_ids,
            variations=variation_list,
            agents=agent or ["gold"],
            repeats=repeats,
            suite=suite,
            scenario_dirs=scenarios_dir,
        )
        from fae.harness.config import MIB
        from fae.harness.paraphrases import Paraphrase
        from fae.harness.upstream_apps import parse_memory_stores

        config = api.RecordConfig(
            stack=api.StackConfig(
                fhir_url=fhir_url,
                llm_url=llm_url,
                memory_stores=parse_memory_stores(memory),
                audit_events=audit_events,
                fsync=fsync,
                max_body_bytes=max_body_mib * MIB,
                processes=processes,
                redact_headers=tuple(redact_header),
                redact_params=tuple(redact_param),
            ),
            llm=api.LlmConfig(model=model, api_key=api_key),
            execution=api.Execution(workers=workers, ray=ray, ray_actors=ray_actors),
            concurrency=concurrency,
            resume=resume,
            retry_errored=retry_errored,
            settle_s=settle,
            paraphrase=Paraphrase.asked(paraphrase_model, paraphrase_seed, paraphrases),
        )
        from fae.harness.model_server import serial_warning

        # an external FHIR server takes one run at a time; otherwise --concurrency runs (shared by any workers)
        warning = serial_warning(llm_url, 1 if fhir_url else concurrency)
        if warning:
            err.print(warning)
        with progress("recording", len(specs), lines=True) as step:

            def advance(spec: Any, status: str) -> None:
                step(1, f"{spec.run_id}: {status}")

            result = api.record(log, specs, config, stop=stop, on_progress=advance)
        table = Table(title=f"recorded into {log}")
        table.add_column("planned", justify="right")
        table.add_column("already done", justify="right")
        for status in ("finished", "errored", "failed", "interrupted"):
            table.add_column(status, justify="right")
        table.add_column("marked interrupted", justify="right")
        table.add_row(
            str(result.planned),
            str(result.skipped),
            *(str(result.statuses.get(s, 0)) for s in ("finished", "errored", "failed", "interrupted")),
            str(result.interrupted_marked),
        )
        out.print(table)
        from fae.cli.study import results_table

        try:
            results_table(log, None, out, configurations=sorted({spec.agent for spec in specs}))
        except Exception:
            if not stop.requested:
                raise
            # a signal while the table is computed interrupts DuckDB's query: the runs are stored, the table waits
            err.print("the results table was skipped: `fae stats --log LOG` prints it")
        if stop.requested:  # also when the signal came as the stack was closing
            err.print(f"stopped by {stop.signal_name}: runs in flight are stored interrupted; {RESUME_HINT}")
            raise typer.Exit(stop.exit_code)
        if result.statuses.get("failed"):
            raise typer.Exit(2)


app.command("runs")(user_errors(_runs))


def _reader(log: Path):
    from fae.store.live import LogReader

    return LogReader(log)


@app.command()
@user_errors(stopped=MIGRATE_STOPPED)
def migrate(log: LogOption = DEFAULT_LOG) -> None:
    """Bring a log made by an older fae up to this fae's schema (while nothing records into it)."""
    from fae.store.log import EventLog

    if not log.exists():
        raise FaeError(f"no log at {log}")
    with EventLog(log) as opened:
        out.print(f"{log}: schema version {opened.schema_version()}")


@app.command()
@user_errors
def show(
    run_id: Annotated[str, typer.Argument(help="The run to show.")],
    log: LogOption = DEFAULT_LOG,
) -> None:
    """Print a run's timeline in time order (exchanges, tool calls, LLM calls, answer), then its verdicts and why."""
    from fae.harness.timeline import timeline_lines
    from fae.report.run_verdicts import verdict_lines

    with _reader(log) as reader:
        _, found = reader.query("SELECT run_id FROM runs WHERE run_id = ?", [run_id])
        if not found:
            raise FaeError(f"no run {run_id!r} in {log}; `fae runs` lists them")
        for shown in timeline_lines(reader, run_id):
            line(shown)
        for shown in verdict_lines(reader, run_id):
            line(shown)


@app.command()
@user_errors
def sql(
    query: Annotated[
        str, typer.Argument(help="SQL over the log (views: fhir_exchanges, llm_calls, tool_calls, run_summary).")
    ],
    log: LogOption = DEFAULT_LOG,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON lines instead of a table.")] = False,
    parquet: Annotated[
        Path | None,
        typer.Option("--parquet", help="Query a directory of `fae export --parquet` exports instead of a log."),
    ] = None,
) -> None:
    """Run one read-only SQL query over the log (works while a recording is going on), or over a directory of
    Parquet exports."""
    from fae.store.export import query_parquet

    if parquet is not None:
        columns, rows = query_parquet(parquet, query)
    else:
        with _reader(log) as reader:
            columns, rows = reader.query(query)
    if as_json:
        for row in rows:
            echo(json.dumps(dict(zip(columns, row, strict=True)), default=str))
    else:
        print_rows(columns, rows)


@app.command()
@user_errors(stopped=EXPORT_STOPPED)
def export(
    parquet: Annotated[
        Path | None,
        typer.Option(
            "--parquet", help="Directory of exports: one folder per table, partitioned by suite, experiment and day."
        ),
    ] = None,
    log: LogOption = DEFAULT_LOG,
    drop: Annotated[
        str | None,
        typer.Option(
            "--drop",
            metavar="NAME",
            help="Instead of exporting, remove the files of the log named NAME (its files' stem) from the directory, "
            "with its unfinished-export marker.",
        ),
    ] = None,
    otel: Annotated[
        str | None,
        typer.Option(
            "--otel",
            metavar="FILE|URL",
            help="Export the runs as OpenTelemetry traces (GenAI conventions): OTLP/JSON lines into FILE, or POSTed "
            "to an OTLP/HTTP endpoint URL (/v1/traces is added unless it ends so). docs/otel.md.",
        ),
    ] = None,
    otel_content: Annotated[
        bool,
        typer.Option(
            "--otel-content", help="Add prompts, completions, tool arguments and results, answers and verdict reasons."
        ),
    ] = False,
    otel_protocol: Annotated[
        str, typer.Option("--otel-protocol", help="For an endpoint: http/protobuf or http/json.")
    ] = "http/protobuf",
    otel_header: Annotated[
        list[str],
        typer.Option(
            "--otel-header",
            metavar="KEY=VALUE",
            help="A header sent to the endpoint (repeatable; also OTEL_EXPORTER_OTLP_HEADERS), e.g. its API key.",
            show_default=False,
        ),
    ] = [],
    runs: RunsOption = None,
) -> None:
    """Export the log's tables to Parquet, partitioned (many logs can share one directory: `fae sql --parquet`),
    or its runs as OpenTelemetry traces (--otel) for Phoenix, Langfuse or any OTLP backend."""
    if (parquet is None) == (otel is None):
        raise FaeError("give one of --parquet DIR or --otel FILE|URL")
    if otel is not None:
        _export_otel(log, otel, runs, otel_content, otel_protocol, otel_header)
        return
    from fae.store.export import drop_export, export_parquet

    assert parquet is not None
    if drop is not None:
        removed = drop_export(parquet, drop)
        out.print(f"removed {removed} files of {drop} from {parquet}")
        return
    with steps("exporting") as on_step:
        written = export_parquet(log, parquet, on_step=on_step)
    for path, count in written:
        out.print(f"{path}  {count} rows")


def _export_otel(log: Path, target: str, runs: str | None, content: bool, protocol: str, headers: list[str]) -> None:
    from fae.report.otel import export_otel, headers_of

    with progress("exporting traces", 0) as step:
        done = export_otel(
            log,
            target,
            runs=runs,
            content=content,
            protocol=protocol,
            headers=headers_of(headers),
            on_progress=lambda count, total: step(count, total=total),
        )
    line(f"{done.runs} runs, {done.spans} spans in {done.requests} requests to {done.target}")
    if done.still_running:
        line(f"left out {done.still_running} runs still recording", stderr=True)
    if done.rejected_spans:
        line(f"the endpoint rejected {done.rejected_spans} spans: {done.rejected_message}", stderr=True)


@app.command()
@user_errors
def demo(
    log: LogOption = Path("fae-demo.duckdb"),
    fresh: Annotated[bool, typer.Option(help="Delete the demo log first.")] = True,
) -> None:
    """Record, judge, rejudge and compare a small suite on the embedded stack: no key, no network."""
    from fae import api
    from fae.cli.judge import print_comparison, print_rejudged
    from fae.harness.demo import record_demo

    if fresh:
        for stale in (log, log.with_name(log.name + ".wal")):
            stale.unlink(missing_ok=True)
    out.rule("1. record: scripted agents, the LangChain agent on a local LLM server, write-verification scenarios")
    with progress("recording the demo", 17, lines=True) as step:
        result = record_demo(log, on_progress=lambda spec, status: step(1, f"{spec.run_id}: {status}"))
    out.print(f"recorded {sum(result.statuses.values())} runs into {log}: {dict(result.statuses)}")
    with _reader(log) as reader:
        columns, rows = reader.query(
            "SELECT s.run_id, s.status, s.tool_calls, s.llm_calls, s.total_tokens,"
            " max(CASE WHEN v.judge = 'task' AND v.rule_set->>'$.mode' = 'strict' THEN v.outcome END) AS strict,"
            " max(CASE WHEN v.judge = 'ensure_record' THEN v.outcome END) AS ensure_record"
            " FROM run_summary s LEFT JOIN verdicts v USING (run_id)"
            " GROUP BY ALL ORDER BY s.run_id"
        )
    print_rows(columns, rows, title="2. live verdicts")
    out.rule("3. rejudge from the log alone with accept_corrections=false")
    print_rejudged(api.rejudge(log, judge_name="ensure_record", rules="accept_corrections=false"), log)
    out.rule("4. compare the two rule sets run by run")
    print_comparison(api.compare(log, "", "accept_corrections=false", judge_name="ensure_record"), show=20)
    out.print(
        f'\nexplore: fae runs --log {log}; fae show RUN --log {log}; fae sql "SELECT * FROM llm_calls" --log {log}'
    )


app.command("rejudge")(user_errors(_rejudge, stopped=REJUDGE_STOPPED))
app.command("compare")(user_errors(_compare))
app.command("replay")(user_errors(_replay))
app.command("train-memory")(user_errors(_train_memory))
app.command("curate")(user_errors(_curate))

from fae.cli.study import report as _report  # noqa: E402
from fae.cli.study import stats as _stats  # noqa: E402
from fae.cli.view import view as _view  # noqa: E402

app.command("stats")(user_errors(_stats))
app.command("report")(user_errors(_report))
app.command("view")(user_errors(_view))


def build_cli() -> Any:
    """The Click command behind ``fae``, with conventional help placeholders."""
    from fae.cli.help import conventional_help

    return conventional_help(typer.main.get_command(app))


OPTIONAL_VALUES = {"--ray": "auto"}
"""Options whose value may be left out (Typer has no such option), and the value they then take."""


def with_optional_values(words: list[str]) -> list[str]:
    """``words`` with the value of each OPTIONAL_VALUES option filled in where it is missing: at the end, or
    before another option (the rule Click applies to its own optional values); nothing after ``--``."""
    filled: list[str] = []
    for index, word in enumerate(words):
        filled.append(word)
        if word == "--":
            return filled + words[index + 1 :]
        if word in OPTIONAL_VALUES and (index + 1 == len(words) or words[index + 1].startswith("-")):
            filled.append(OPTIONAL_VALUES[word])
    return filled


def main() -> None:
    """``fae``: every command behind one error handler, so a user's mistake is one line, never a traceback."""
    try:
        build_cli()(args=with_optional_values(sys.argv[1:]), prog_name="fae")
    except (FaeError, BaseExceptionGroup) as exc:
        found = user_error(exc)
        if found is None:
            raise
        error_line(found)
        sys.exit(1)


if __name__ == "__main__":
    main()
