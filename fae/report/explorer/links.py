"""Which runs a report cell stands for: a row's keys (experiment, phase, configuration) and the column's own
value (a failure mode, a tool, a difficulty or family slice) become the filters of a ``/runs`` link."""

from __future__ import annotations

from typing import Any

from fae.report.explorer.markup import href
from fae.report.scope import Table

BASE = ("experiment", "phase", "configuration")
SLICES = ("difficulty", "family")
OWN = {"failure_mode": "failure_mode", "tool": "tool", "task_id": "task_id"}
"""A column whose value is itself a filter of the runs list."""
LINKED = ("configuration", "runs", "value", "a", "b", "only_a", "only_b", *OWN)
FLIPPED = {"only_a": "true", "only_b": "false"}
"""The paired table's discordant counts: a's runs that passed where b's failed (only_a), or failed where b's
passed (only_b), on the same task, variation and trial: the runs that flip between the two."""


def cell_link(table: Table, column: str, row: tuple[Any, ...]) -> str | None:
    """The escaped ``/runs?…`` link of one cell, or None where the cell stands for no set of runs."""
    if column not in LINKED or column not in table.columns:
        return None
    values = dict(zip(table.columns, row, strict=True))
    query: dict[str, Any] = {k: values[k] for k in BASE if values.get(k) is not None}
    if column in ("a", "b"):  # the paired table: each side is a configuration
        return href("/runs", {**query, "configuration": values[column]}) if values.get(column) else None
    if column in FLIPPED and values.get("a") and values.get("b"):
        return href("/runs", {**query, "configuration": values["a"], "versus": values["b"], "strict": FLIPPED[column]})
    if "configuration" not in query:
        return None
    if values.get("slice") in SLICES and values.get("value") not in (None, "?"):
        query[str(values["slice"])] = values["value"]
    elif column == "value":
        return None
    for name, filter_name in OWN.items():
        if values.get(name) is not None and name in table.columns:
            query[filter_name] = values[name]
    return href("/runs", query)
