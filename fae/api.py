"""The public Python API: what the ``fae`` command line does, as functions a script can call.

Every function takes plain values and returns a plain result; a user mistake
raises a ``FaeError`` subclass with a one-line message (the CLI prints it).
``import fae`` exposes these names; docs/api.md walks through them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fae.agents.base import Agent, AgentContext, AgentResult
from fae.errors import FaeError, StoreError, TaskError
from fae.harness.config import Execution, LlmConfig, RecordConfig, StackConfig
from fae.harness.interrupt import StopRequest
from fae.judge.compare import Comparison
from fae.judge.compare import compare as _compare
from fae.judge.context import RunContext
from fae.judge.export_rejudge import rejudge_export
from fae.judge.registry import Rule, Verdict, parse_rules, register_judge
from fae.judge.rejudge import RejudgeResult
from fae.judge.rejudge import rejudge as _rejudge
from fae.replay.stream import ConnectionQueries
from fae.store.export import open_parquet
from fae.store.log import EventLog
from fae.tasks.fixture import BUILTIN_TASK
from fae.tasks.scenarios import add_scenario_dir, is_scenario_task
from fae.tasks.sources import add_task_dir
from fae.tasks.suite import Suite, load_suite

if TYPE_CHECKING:
    from fae.agents.prefixes import register_agent
    from fae.harness.redrive import ReplayReport
    from fae.harness.run import RunSpec
    from fae.harness.suite_runner import SuiteResult
    from fae.report.prices import PriceTable
    from fae.report.study import Study

# Recording, replay, the agents and the study import the recording stack (mitmproxy, the MCP SDK, LangChain,
# the OpenAI client, numpy): ~2 CPU-seconds, more than judging 1,000 runs. They are imported by the functions
# that use them, and their names here load on first use, so `fae rejudge`, `fae compare` and a script that only
# judges start without them.
_LAZY = {
    "register_agent": "fae.agents.prefixes",
    "ReplayReport": "fae.harness.redrive",
    "SuiteResult": "fae.harness.suite_runner",
    "Study": "fae.report.study",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "Agent",
    "AgentContext",
    "AgentResult",
    "Comparison",
    "EventLog",
    "Execution",
    "FaeError",
    "LlmConfig",
    "RecordConfig",
    "RejudgeResult",
    "ReplayReport",
    "Rule",
    "RunContext",
    "StackConfig",
    "SuiteResult",
    "Verdict",
    "add_task_dir",
    "compare",
    "open_log",
    "run_specs",
    "query",
    "record",
    "register_agent",
    "register_judge",
    "rejudge",
    "replay",
    "stats",
    "Study",
    "tasks",
    "write_report",
]


def open_log(path: str | Path, *, read_only: bool = True) -> EventLog:
    """Open a log; read-only by default (many readers), or for writing (one writer at a time)."""
    path = Path(path)
    if read_only and not path.exists():
        raise StoreError(f"no log at {path}")
    return EventLog(path, read_only=read_only)


def query(log: str | Path, sql: str, params: Sequence[Any] | None = None) -> list[dict[str, Any]]:
    """Rows of a read-only SQL query over a log (also while it is being recorded), as dicts."""
    from fae.store.live import LogReader

    with LogReader(log) as reader:
        columns, rows = reader.query(sql, list(params) if params is not None else None)
    return [dict(zip(columns, row, strict=True)) for row in rows]


def tasks() -> Suite:
    """Every task: fae's suite, ``FAE_TASKS_PATH``, directories given to ``add_task_dir``, and plugins'."""
    return load_suite()


def run_specs(
    task_ids: Sequence[str],
    *,
    variations: Sequence[int] = (0,),
    agents: Sequence[str] = ("gold",),
    repeats: int = 1,
    suite: str | None = None,
    scenario_dirs: Sequence[str | Path] = (),
) -> list[RunSpec]:
    """The runs ``record`` would make: every (task, variation, agent, repeat), in a stable order.

    A task is one of the suite's (with task directories and plugins), a write-verification scenario
    task (with ``scenario_dirs``), or the built-in fixture.
    """
    from fae.harness.worklist import suite_specs

    for folder in scenario_dirs:
        add_scenario_dir(folder)
    if not task_ids:
        raise TaskError("name at least one task (or 'all')")
    if list(task_ids) == ["all"]:
        task_ids = list(load_suite())
    known = load_suite()
    for task_id in task_ids:
        if task_id != BUILTIN_TASK and task_id not in known and not is_scenario_task(task_id):
            known[task_id]  # raises the one-line TaskError naming `fae tasks list`
    if repeats < 1:
        raise TaskError("repeats must be at least 1")
    from fae.agents.prefixes import check_agent

    for agent in dict.fromkeys(agents):  # before any progress or recording starts
        check_agent(agent)
    return suite_specs(list(task_ids), list(variations), list(agents), repeats, suite)


def record(
    log: str | Path,
    runs: Sequence[RunSpec],
    config: RecordConfig | None = None,
    *,
    stop: StopRequest | None = None,
    on_progress: Callable[[RunSpec, str], None] | None = None,
) -> SuiteResult:
    """Record ``runs`` (``run_specs``) through the proxy into ``log`` and judge each as it ends; returns the
    statuses.

    ``config`` (``RecordConfig``: the stack's servers and redaction, the LLM agents' model and key, concurrency,
    resume, paraphrases, and whether the runs go in this process, in worker processes or on Ray) is documented
    field by field in ``fae.harness.config``. The API key and every redacted value are scrubbed from all that is
    stored. ``stop`` (``fae.harness.interrupt``) lets a signal end the recording cleanly: runs in flight are stored
    interrupted. ``on_progress(spec, status)`` is called as each run ends.
    """
    from fae.harness.recording import record as record_planned_suite
    from fae.harness.run import RunSpec as Planned  # the recording stack loads on first use (see _LAZY)

    if isinstance(runs, str) or not all(isinstance(spec, Planned) for spec in runs):
        raise TaskError("record takes the runs run_specs returns: fae.record(log, fae.run_specs([...]), config)")
    return record_planned_suite(log, list(runs), config, stop=stop, on_progress=on_progress)


def _rules(rules: Mapping[str, Any] | str | Sequence[str] | None) -> dict[str, Any]:
    if rules is None:
        return {}
    if isinstance(rules, str):
        return parse_rules([rules] if rules else [])
    if isinstance(rules, Mapping):
        return dict(rules)
    return parse_rules(list(rules))


def rejudge(
    log: str | Path | None = None,
    *,
    parquet: str | Path | None = None,
    judge_name: str | None = None,
    rules: Mapping[str, Any] | str | Sequence[str] | None = None,
    runs: str | None = None,
    chunk: int | None = None,
    workers: int | None = None,
    ray: str | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    tasks: str = "log",
    full: bool = False,
    from_events: bool = False,
) -> RejudgeResult:
    """Judge recorded runs again from the log alone, on ``workers`` processes (default: every core),
    and append the verdicts as one batch; ``on_progress(judged, planned)`` reports progress.
    ``tasks``: each run is judged against the task its log keeps ("log", the default), or against today's task
    files ("current"; a run whose variation renders otherwise now gets ``task_changed``).
    ``ray``: judge ``workers`` shards as tasks on the Ray cluster at this address (the log on shared storage).
    ``parquet``: judge the runs of this ``fae export --parquet`` directory instead of a log, and add the
    batch's verdicts to it (``DIR/verdicts``, ``DIR/verdict_batches``; docs/scale.md).
    Incremental unless ``full``: a verdict the log already holds under the same rules and code version stands and
    is not judged again (docs/judging.md, "Rejudging only what changed"); a run whose judges still to apply kept
    their findings in the log is decided from them without being read, unless ``from_events`` (docs/judging.md,
    "Findings kept in the log")."""
    options: dict[str, Any] = {
        "judge_name": judge_name,
        "overrides": _rules(rules),
        "runs": runs,
        "chunk": chunk,
        "workers": workers,
        "ray": ray,
        "on_progress": on_progress,
        "tasks": tasks,
    }
    if parquet is not None:
        return rejudge_export(parquet, **options)
    if log is None:
        raise StoreError("name a log or a Parquet export to rejudge")
    return _rejudge(log, **options, full=full, from_events=from_events)


def compare(
    log: str | Path | None,
    old: Mapping[str, Any] | str | None,
    new: Mapping[str, Any] | str | None,
    *,
    judge_name: str | None = None,
    runs: str | None = None,
    workers: int | None = None,
    ray: str | None = None,
    parquet: str | Path | None = None,
    from_events: bool = False,
) -> Comparison:
    """Verdicts under ``old`` and ``new`` rules, run by run: outcome changes, flipped runs, harms.

    Verdicts the log lacks are decided from the findings it keeps (``fae.judge.facts``) or, for runs without
    them or with ``from_events``, judged now from the events, on ``workers`` processes (default: every core),
    or as tasks on the Ray cluster at ``ray``. ``parquet``: compare the runs and verdicts of this
    ``fae export --parquet`` directory instead of a log.
    """
    if parquet is not None:
        directory = Path(parquet).resolve()
        con = open_parquet(directory)
        try:
            return _compare(
                ConnectionQueries(con, directory),
                _rules(old),
                _rules(new),
                judge_name=judge_name,
                runs=runs,
                workers=workers,
                ray=ray,
                export=directory,
            )
        finally:
            con.close()
    if log is None:
        raise StoreError("name a log or a Parquet export to compare")
    from fae.store.live import LogReader

    with LogReader(log) as reader:
        if reader.live:
            raise StoreError(f"log {log} is being recorded; compare it when the recording ends")
        return _compare(
            reader,
            _rules(old),
            _rules(new),
            judge_name=judge_name,
            runs=runs,
            log_path=Path(log),
            workers=workers,
            ray=ray,
            from_events=from_events,
        )


def stats(
    log: str | Path,
    *,
    experiment: str | None = None,
    phase: str | None = None,
    prices: Mapping[str, tuple[float, float]] | None = None,
    price_files: Sequence[str | Path] = (),
    pairs: Sequence[tuple[str, str]] | None = None,
    tables: Sequence[str] | None = None,
) -> Study:
    """Every analysis of the log's runs (docs/study.md), each table with the SQL that made it.

    The cost uses fae's dated list prices, then each of ``price_files`` (the format of fae/report/prices.yaml),
    then ``prices``: model -> (USD per million prompt tokens, per million completion tokens);
    ``pairs``: configurations to test against each other (default every pair); ``tables``: only these.
    """
    from fae.report import commands

    return commands.study(
        log,
        experiment=experiment,
        phase=phase,
        prices=_price_table(prices, price_files),
        pairs=pairs,
        tables=tables,
    )


def _price_table(prices: Mapping[str, tuple[float, float]] | None, files: Sequence[str | Path]) -> PriceTable:
    from fae.report.prices import Price, price_table

    return price_table(files, {model: Price(rate[0], rate[1]) for model, rate in (prices or {}).items()})


def write_report(
    log: str | Path,
    output: str | Path,
    *,
    experiment: str | None = None,
    phase: str | None = None,
    prices: Mapping[str, tuple[float, float]] | None = None,
    price_files: Sequence[str | Path] = (),
    pairs: Sequence[tuple[str, str]] | None = None,
) -> Path:
    """Write one self-contained HTML report (figures, tables, the SQL behind each); returns its path.
    ``prices`` and ``price_files`` as for ``stats``."""
    from fae.report import commands

    return commands.report(
        log, output, experiment=experiment, phase=phase, prices=_price_table(prices, price_files), pairs=pairs
    )


def replay(
    log: str | Path,
    run_id: str,
    *,
    lenient: bool = False,
    out: str | Path | None = None,
    memory: Sequence[str] = (),
    agent: str | None = None,
    trust_log_agent: bool = False,
) -> ReplayReport:
    """Re-drive a recorded run against a fresh sandbox; its LLM (if any) is answered from the log. A program or
    A2A agent is re-run only as ``agent`` names it again or, with ``trust_log_agent``, as the log names it."""
    from fae.harness.replay_run import replay_run
    from fae.harness.stack import parse_memory_stores

    return replay_run(
        log,
        run_id,
        lenient=lenient,
        out=out,
        memory_stores=parse_memory_stores(list(memory)),
        agent=agent,
        trust_log_agent=trust_log_agent,
    )
