"""Study tables as text: rich tables that fit 100 columns, CSV, and JSON."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from rich import box
from rich.table import Table as RichTable

from fae.report.rule_sets import rule_set_label
from fae.report.scope import Table

# constant key columns move into the title so the table keeps its width for the numbers
FOLDED = ("experiment", "phase")
SHORT = {
    "experiment": "exp",
    "configuration": "config",
    "retried": "retry",
    "finished": "fin",
    "errored": "err",
    "strict_pct": "strict",
    "light_pct": "light",
    "seconds": "s",
    "duration_ms": "ms",
    "total_pp2": "total",
    "failed": "fail",
    "scored": "scored",
    "mean_tokens": "mean",
    "median_tokens": "median",
    "total_tokens": "total",
    "same_prompt_cv": "same-prompt",
    "within_task_cv": "within-task",
    "overall_cv": "overall",
    "error_rate": "rate",
    "pass_hat_k": "pass^k",
    "pass_at_k": "pass@k",
    "unpriced_calls": "unpriced",
    "unknown_token_calls": "unknown calls",
    "unknown_runs": "unknown",
    "false_stops": "false stops",
    "strict_low": "low",
    "strict_high": "high",
    "light_low": "low",
    "light_high": "high",
    "diff_low": "low",
    "diff_high": "high",
    "mcnemar_p": "p",
    "tokens": "tokens",
    "strict_mean": "strict",
    "strict_std": "±",
    "light_mean": "light",
    "light_std": "±",
    "between_task_pp2": "between",
    "within_task_pp2": "within",
    "same_prompt_pp2": "same-prompt",
    "between_task_share": "b%",
    "within_task_share": "w%",
    "same_prompt_share": "s%",
    "usd_per_success": "usd/success",
    "usd_per_run": "usd/run",
    "success_pct": "success",
    "successes": "passed",
    "tool_calls": "calls",
    "expected_calls": "expected",
    "excess_calls": "excess",
    "median_ratio": "ratio",
}


def cell(table: Table, column: str, value: Any) -> str:
    if value is None:
        return "unknown" if column in table.unknown else "-"
    if stored_rule_set(value):
        return rule_set_named(value)
    fmt = table.formats.get(column)
    if fmt and isinstance(value, (int, float)):
        return fmt.format(value)
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def _common_model(table: Table) -> str | None:
    """The ``@MODEL`` every configuration ends with, if they share one (shown once, in the title)."""
    index = [i for i, c in enumerate(table.columns) if c in ("configuration", "a", "b")]
    values = {str(r[i]) for r in table.rows for i in index if r[i] is not None}
    models = {v.rpartition("@")[2] for v in values if "@" in v}
    if len(models) == 1 and values and all("@" in v for v in values):
        return models.pop()
    return None


def rich_table(table: Table, width: int = 100) -> RichTable:
    """A rich table; columns the same in every row (experiment, phase) and a shared model go to the title."""
    folded = {
        c: table.rows[0][i]
        for i, c in enumerate(table.columns)
        if c in FOLDED and table.rows and len({r[i] for r in table.rows}) == 1
    }
    model = _common_model(table)
    if model:
        folded["model"] = model
    title = table.title + "".join(f"  [{c} {v if v is not None else '-'}]" for c, v in folded.items())
    shown = [i for i, c in enumerate(table.columns) if c not in folded]
    out = RichTable(
        title=title,
        title_justify="left",
        caption=table.note or None,
        caption_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        padding=(0, 1),
        collapse_padding=True,
    )

    def text(column: str, value: object) -> str:
        shown_value = cell(table, column, value)
        if model and column in ("configuration", "a", "b"):
            return shown_value.removesuffix("@" + model)
        return shown_value

    columns = []
    for i in shown:
        column = table.columns[i]
        numeric = any(isinstance(r[i], (int, float)) and not isinstance(r[i], bool) for r in table.rows)
        widest = max((len(text(column, r[i])) for r in table.rows), default=1)
        columns.append((column, numeric, max(widest, len(SHORT.get(column, column))) if numeric else widest))
    # names stay whole (up to 30 characters) where the numbers fit beside them; else they fold
    whole = sum(min(w, 30) + 2 for _, _, w in columns) <= width - 4
    for column, numeric, widest in columns:
        out.add_column(
            SHORT.get(column, column) or "",
            justify="right" if numeric else "left",
            overflow="fold",
            min_width=min(widest, 30) if whole and not numeric else None,
        )
    for row in table.rows:
        out.add_row(*(text(table.columns[i], row[i]) for i in shown))
    return out


def stored_rule_set(value: Any) -> bool:
    """A rule set as a table's SQL gives it: ``{rules: its JSON, hash: its hash}``."""
    return isinstance(value, dict) and set(value) == {"rules", "hash"}


def rule_set_named(value: dict[str, str]) -> str:
    """A stored rule set named as every command names one: ``accept_corrections=false (19d98351)``."""
    try:
        rules = json.loads(value["rules"])
    except (TypeError, ValueError):
        rules = {"rule_set": value["rules"]}
    return rule_set_label(rules if isinstance(rules, dict) else {"rule_set": rules}, str(value["hash"]))


def as_csv(table: Table) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(table.columns)
    writer.writerows([rule_set_named(v) if stored_rule_set(v) else v for v in row] for row in table.rows)
    return buffer.getvalue()


def as_json(tables: list[Table]) -> str:
    return json.dumps(
        {
            t.name: {"title": t.title, "note": t.note, "sql": t.sql, "columns": t.columns, "rows": t.dicts()}
            for t in tables
        },
        default=str,
        indent=1,
    )
