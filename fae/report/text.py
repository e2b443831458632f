"""Study tables as text: rich tables that fit 100 columns, CSV, and JSON."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from rich.table import Table as RichTable

from fae.report.scope import Table

# constant key columns move into the title so the table keeps its width for the numbers
FOLDED = ("experiment", "phase")
SHORT = {"configuration": "config", "retried": "retry", "finished": "fin", "errored": "err",
         "strict_pct": "strict%", "light_pct": "light%", "duration_ms": "ms", "total_pp2": "total", "strict_mean": "strict", "strict_std": "±", "light_mean": "light",
         "light_std": "±", "between_task_pp2": "between", "within_task_pp2": "within",
         "same_prompt_pp2": "same-prompt", "between_task_share": "b%", "within_task_share": "w%",
         "same_prompt_share": "s%", "usd_per_success": "usd/success", "tool_calls": "calls",
         "expected_calls": "expected", "excess_calls": "excess", "median_ratio": "ratio"}


def cell(table: Table, column: str, value: Any) -> str:
    if value is None:
        return "-"
    fmt = table.formats.get(column)
    if fmt and isinstance(value, (int, float)):
        return fmt.format(value)
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def rich_table(table: Table) -> RichTable:
    """A rich table; columns the same in every row (experiment, phase) go to the title."""
    folded = {c: table.rows[0][i] for i, c in enumerate(table.columns)
              if c in FOLDED and table.rows and len({r[i] for r in table.rows}) == 1}
    title = table.title + "".join(f"  [{c} {v if v is not None else '-'}]" for c, v in folded.items())
    shown = [i for i, c in enumerate(table.columns) if c not in folded]
    out = RichTable(title=title, title_justify="left", caption=table.note or None, caption_justify="left",
                    pad_edge=False, padding=(0, 1))
    for i in shown:
        column = table.columns[i]
        numeric = any(isinstance(r[i], (int, float)) and not isinstance(r[i], bool) for r in table.rows)
        out.add_column(SHORT.get(column, column), justify="right" if numeric else "left",
                       overflow="fold")
    for row in table.rows:
        out.add_row(*(cell(table, table.columns[i], row[i]) for i in shown))
    return out


def as_csv(table: Table) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(table.columns)
    writer.writerows(table.rows)
    return buffer.getvalue()


def as_json(tables: list[Table]) -> str:
    return json.dumps({t.name: {"title": t.title, "note": t.note, "sql": t.sql, "columns": t.columns,
                                "rows": t.dicts()} for t in tables}, default=str, indent=1)
