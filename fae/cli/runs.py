"""``fae runs``: the runs of a log, each with its strict verdict, its failure mode and why it did not pass."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.cells import cell_len

from fae.cli.console import line, out
from fae.cli.options import DEFAULT_LOG, LogOption, RunsOption
from fae.errors import FaeError
from fae.report.reasons import cut
from fae.util.visible import visible

COLUMNS = ("run", "task", "agent", "status", "stop", "strict", "failure mode", "tools", "llm", "tokens")
DROPPED_FIRST = ("llm", "tools", "tokens", "stop", "agent", "task")
"""Columns left out, in this order, while a line is wider than the terminal (a run id of fae's names the
task, variation, agent and repeat already)."""
NUMBERS = ("tools", "llm", "tokens")
GAP = "  "
RUN_AT_LEAST = 24
"""The run column is cut (in its middle, both ends kept) no narrower than this."""
SQL = (
    "SELECT run_id, task_id, variation, agent, repeat, status, stop_reason, tool_calls, llm_calls, total_tokens,"
    " (SELECT error FROM runs r WHERE r.run_id = s.run_id) AS error FROM run_summary s{where}"
    " ORDER BY started_at, run_id LIMIT ?"
)


def runs(
    log: LogOption = DEFAULT_LOG,
    runs: RunsOption = None,
    status: Annotated[str | None, typer.Option(help="Only runs with this status (as --runs status=...).")] = None,
    task: Annotated[str | None, typer.Option(help="Only runs of this task (as --runs task=...).")] = None,
    limit: Annotated[int, typer.Option(help="At most this many rows.")] = 200,
) -> None:
    """List the runs in a log with their strict verdict, failure mode and why (works while a recording is going
    on, in worker processes too)."""
    from fae.harness.shards import shard_paths
    from fae.replay.source import runs_filter
    from fae.report.run_verdicts import run_headlines
    from fae.store.live import LogReader

    where, params = runs_filter(runs)
    where = [f"run_id IN (SELECT run_id FROM runs WHERE {' AND '.join(where)})"] if where else []
    if status:
        where.append("status = ?")
        params.append(status)
    if task:
        where.append("task_id = ?")
        params.append(task)
    sql = SQL.format(where=" WHERE " + " AND ".join(where) if where else "")
    found: list[dict[str, Any]] = []
    # a recording in worker processes: its runs so far, read live from each shard
    for index, path in enumerate([log, *shard_paths(log)]):
        try:
            with LogReader(path) as reader:
                rows = reader.query(sql, [*params, limit])[1]
                errors = {row[0]: row[10] for row in rows if row[10]}
                headlines = run_headlines(reader, [row[0] for row in rows], errors)
        except FaeError:
            if index == 0:
                raise
            continue  # a shard not serving yet, or merged and removed meanwhile
        for run_id, task_id, _, agent, _, run_status, stop, tools, llm, tokens, _ in rows:
            said = headlines[run_id]
            found.append(
                {"run": run_id, "task": task_id, "agent": agent, "status": run_status, "stop": stop}
                | {"strict": said.strict, "failure mode": said.failure_mode, "tools": tools, "llm": llm}
                | {"tokens": tokens, "why": said.why}
            )
    print_runs(found[:limit], Path(log))


def _middle_cut(text: str, width: int) -> str:
    """``text`` in ``width`` cells, cut in its middle where longer (a run id's task and repeat both stay)."""
    if cell_len(text) <= width:
        return text
    head = (width - 1) // 2
    return text[:head] + "…" + text[len(text) - (width - 1 - head) :]


def runs_lines(rows: Sequence[Mapping[str, Any]], width: int) -> list[str]:
    """The runs table as lines of at most ``width`` cells: a header, one line a run, and under a run that did
    not pass, why (indented, on one line: cut, the cut marked, where longer). Every value is shown with its
    hidden characters escaped."""
    cells = [{key: visible("" if value is None else str(value)) for key, value in row.items()} for row in rows]
    columns = list(COLUMNS)
    widths = {c: max([cell_len(c), *(cell_len(row[c]) for row in cells)]) for c in columns}

    def total() -> int:
        return sum(widths[c] for c in columns) + len(GAP) * (len(columns) - 1)

    for dropped in DROPPED_FIRST:
        if total() <= width:
            break
        columns.remove(dropped)
    widths["run"] = max(RUN_AT_LEAST, widths["run"] - max(0, total() - width))

    def joined(values: dict[str, str]) -> str:
        parts = []
        for c in columns:
            text = _middle_cut(values[c], widths[c]) if c == "run" else values[c]
            pad = " " * max(0, widths[c] - cell_len(text))
            parts.append(pad + text if c in NUMBERS else text + pad)
        return GAP.join(parts).rstrip()

    lines = [joined({c: c for c in columns}), "─" * min(width, total())]
    for row in cells:
        lines.append(joined(row))
        if row["why"]:
            lines.append("    " + cut(row["why"], max(RUN_AT_LEAST, width - 4)))
    return lines


def print_runs(rows: Sequence[Mapping[str, Any]], log: Path) -> None:
    """The runs table at the terminal's width (240 when piped)."""
    line(f"{len(rows)} runs in {log}")
    for shown in runs_lines(rows, out.width):
        line(shown)
