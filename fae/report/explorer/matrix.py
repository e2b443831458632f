"""The configuration × task grid: each cell the strict passes of that configuration on that task (k of n
scored runs), shaded by rate and linked to its runs; and the headline that opens the report."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fae.report.explorer.markup import href, text
from fae.report.scope import Queryable, Scope, Table

WIDEST = 30
"""More configurations than this and the grid is shown long (one row per pair) so it still fits the page."""


@dataclass(frozen=True)
class Cell:
    configuration: str
    task_id: str
    runs: int
    scored: int
    passed: int


def cells(log: Queryable, scope: Scope) -> list[Cell]:
    sql = (
        f"WITH {scope.cte()} SELECT configuration, task_id, count(*), count(strict), count(*) FILTER (WHERE strict)"
        " FROM scope GROUP BY ALL ORDER BY ALL"
    )
    return [Cell(str(c), str(t), n, s, p) for c, t, n, s, p in log.query(sql)[1]]


def _shade(cell: Cell) -> str:
    if not cell.scored:
        return "background:#eeeeee"
    rate = cell.passed / cell.scored  # blue (all pass) to orange (none): a pair colour-blind readers tell apart
    return (
        f"background:rgba(0,114,178,{0.12 + 0.55 * rate:.2f})"
        if rate >= 0.5
        else (f"background:rgba(230,159,0,{0.15 + 0.55 * (1 - rate):.2f})")
    )


def _said(cell: Cell) -> str:
    return f"{cell.passed}/{cell.scored}" if cell.scored else f"0/0 ({cell.runs} unscored)"


def grid_html(found: list[Cell], scope: Scope, *, linked: bool) -> str:
    """The grid as HTML (tasks down, configurations across), each cell linked to its runs when ``linked``."""
    if not found:
        return '<p class="note">no runs in scope</p>'
    configs = sorted({c.configuration for c in found})
    tasks = sorted({c.task_id for c in found})
    at = {(c.task_id, c.configuration): c for c in found}
    base = {"experiment": scope.experiment, "phase": scope.phase}

    def shown(cell: Cell | None) -> str:
        if cell is None:
            return "<td>—</td>"
        said = text(_said(cell))
        link = href("/runs", {**base, "configuration": cell.configuration, "task_id": cell.task_id})
        inner = f'<a href="{link}">{said}</a>' if linked else said
        rate = cell.passed / cell.scored if cell.scored else -1
        return f'<td style="{_shade(cell)}" data-v="{rate:.4f}">{inner}</td>'

    if len(configs) > WIDEST:
        head = "<th>task</th><th>configuration</th><th>strict passes</th>"
        rows = [f"<tr><td>{text(c.task_id)}</td><td>{text(c.configuration)}</td>{shown(c)}</tr>" for c in found]
    else:
        head = "<th>task</th>" + "".join(f"<th>{text(c)}</th>" for c in configs)
        rows = [f"<tr><td>{text(t)}</td>" + "".join(shown(at.get((t, c))) for c in configs) + "</tr>" for t in tasks]
    return (
        '<p class="note">Strict passes / scored runs of each configuration on each task; blue: mostly passed, '
        "orange: mostly failed, grey: none scored."
        + (" Click a cell for its runs." if linked else " <code>fae view LOG</code> opens each cell's runs.")
        + f'</p><div class="scroll"><table class="data grid"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None


def headline_html(overview: Table | None, found: list[Cell]) -> str:
    """What the log holds and who did best, in two sentences."""
    runs = sum(c.runs for c in found)
    configs = sorted({c.configuration for c in found})
    tasks = {c.task_id for c in found}
    said = [f"{runs} runs of {len(tasks)} tasks by {len(configs)} configurations."]
    if overview is not None and overview.rows:
        at = {name: i for i, name in enumerate(overview.columns)}
        rated = [(r, _number(r[at["strict_pct"]])) for r in overview.rows if _number(r[at["strict_pct"]]) is not None]
        if rated:
            best = max(rate for _, rate in rated if rate is not None)
            top = [r for r, rate in rated if rate == best]
            names = ", ".join(str(r[at["configuration"]]) for r in top)
            said.append(f"Best strict success: {names} at {best:.1f} %" + (" (a tie)." if len(top) > 1 else "."))
        errored = sum(int(r[at["errored"]] or 0) for r in overview.rows)
        failed = sum(int(r[at["failed"]] or 0) for r in overview.rows)
        said.append(f"{errored} runs errored on the agent's side, {failed} failed on fae's side (left out).")
    return f'<p class="headline">{text(" ".join(said))}</p>'
