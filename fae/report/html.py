"""`fae report`: one self-contained HTML page (no network, works from file://) with figures, tables and SQL.

`fae view` serves the same page with every cell linked to its runs (``linked``); fae.report.explorer."""

from __future__ import annotations

import html
from pathlib import Path

from fae.errors import FaeError
from fae.report.explorer.links import cell_link
from fae.report.explorer.markup import CSS, POLICY, SCRIPT
from fae.report.explorer.matrix import Cell, grid_html, headline_html
from fae.report.scope import Figure, Table
from fae.report.study import Study
from fae.report.text import cell
from fae.util.visible import visible

STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d2733;background:#fbfbfc}
header{background:#1d3557;color:#fff;padding:18px 28px}header h1{margin:0;font-size:22px}
header p{margin:4px 0 0;opacity:.85}main{max-width:1180px;margin:0 auto;padding:8px 28px 40px}
nav{columns:2;font-size:13px;margin:14px 0}nav a{color:#1d3557}
section{background:#fff;border:1px solid #e3e6ea;border-radius:6px;padding:14px 18px;margin:16px 0}
h2{font-size:17px;margin:0 0 8px}figure{margin:0}figure svg{max-width:100%;height:auto}
.note{color:#555;font-size:13px;margin:6px 0}
table{border-collapse:collapse;font-size:12.5px;margin:6px 0;font-variant-numeric:tabular-nums}
th,td{border-bottom:1px solid #eceef1;padding:3px 9px;text-align:left}td.n{text-align:right}
th{background:#f3f5f8;position:sticky;top:0}details{margin-top:6px}summary{cursor:pointer;color:#1d3557}
pre{background:#f5f6f8;padding:10px;overflow:auto;font-size:12px;border-radius:4px}
.headline{font-size:15px;margin:4px 0}
"""


def _text(value: str) -> str:
    """Text from the log as HTML: markup escaped, and hidden characters (a bidi override) shown as escapes."""
    return html.escape(visible(value))


def _table_html(table: Table, linked: bool) -> str:
    """The table with a column no row has a value in left out (said in a note), each number's raw value kept
    for sorting, and (``linked``) each cell that stands for runs linked to them."""
    kept = [i for i, c in enumerate(table.columns) if any(row[i] is not None for row in table.rows)]
    empty = [c for i, c in enumerate(table.columns) if i not in kept]
    head = "".join(f"<th>{_text(table.columns[i])}</th>" for i in kept)
    body = []
    for row in table.rows:
        cells = []
        for i in kept:
            column, value = table.columns[i], row[i]
            numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
            shown = _text(cell(table, column, value))
            link = cell_link(table, column, row) if linked else None
            shown = f'<a href="{link}">{shown}</a>' if link else shown
            cells.append(f'<td class=n data-v="{value!r}">{shown}</td>' if numeric else f"<td>{shown}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    note = f'<p class="note">No value in any row, left out: {_text(", ".join(empty))}.</p>' if empty else ""
    return (
        f'{note}<div class="scroll"><table class="data"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def _sql(sql: str) -> str:
    return f"<details><summary>SQL (paste into <code>fae sql</code>)</summary><pre>{_text(sql)}</pre></details>"


def _figure(figure: Figure) -> str:
    return (
        f'<section id="{figure.name}" class="figure"><h2>{_text(figure.title)}</h2>'
        f"<figure>{figure.svg}</figure>{_sql(figure.sql)}</section>"
    )


def _table_section(table: Table, linked: bool) -> str:
    note = f'<p class="note">{_text(table.note)}</p>' if table.note else ""
    return (
        f'<section id="table-{table.name}" class="table"><h2>{_text(table.title)}</h2>{note}'
        f"{_table_html(table, linked) if table.rows else '<p class=note>no rows</p>'}{_sql(table.sql)}</section>"
    )


def render_report(
    study: Study, figures: list[Figure], *, log_name: str, cells: list[Cell] | None = None, linked: bool = False
) -> str:
    """The page as a string: the headline and the configuration × task grid (from ``cells``), every figure,
    then every table, each with the SQL that produced it; ``linked`` (`fae view`) links cells to their runs."""
    scope = (
        ", ".join(f"{k} {v}" for k, v in (("experiment", study.scope.experiment), ("phase", study.scope.phase)) if v)
        or "all runs"
    )
    links = [f'<a href="#{f.name}">{_text(f.title)}</a><br>' for f in figures]
    links += [f'<a href="#table-{t.name}">{_text(t.title)}</a><br>' for t in study.tables.values()]
    summary = ""
    if cells is not None:
        summary = (
            f'<section id="summary"><h2>Summary</h2>{headline_html(study.tables.get("overview"), cells)}'
            f"<h3>Configuration × task</h3>{grid_html(cells, study.scope, linked=linked)}</section>"
        )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{POLICY}">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>fae report: {_text(log_name)}</title><style>{CSS}{STYLE}</style></head><body>"
        f"<header><h1>fae study report</h1><p>log {_text(log_name)} · {_text(scope)} · "
        + (f"model {_text(study.shared_model)} · " if study.shared_model else "")
        + f"{len(figures)} figures · {len(study.tables)} tables · every number from the log, by the SQL under it"
        "</p></header><main>"
        f"{summary}<nav>{''.join(links)}</nav>"
        + "".join(_figure(f) for f in figures)
        + "".join(_table_section(t, linked) for t in study.tables.values())
        + f"</main><script>{SCRIPT}</script></body></html>\n"
    )


def write_report(
    study: Study, figures: list[Figure], output: str | Path, *, log_name: str, cells: list[Cell] | None = None
) -> Path:
    """Write the page to ``output``; returns its path."""
    page = render_report(study, figures, log_name=log_name, cells=cells)
    path = Path(output)
    try:
        path.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise FaeError(f"cannot write the report to {path}: {exc.strerror or exc}") from None
    return path
