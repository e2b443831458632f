"""The runs behind a cell: ``/runs?configuration=A&task_id=T1&failure_mode=…`` lists the runs that match,
newest log order first, a page of ``PAGE`` at a time, each linked to its run page."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fae.report.explorer.markup import href, page, run_href, text

PAGE = 500
EQUAL = (
    "experiment",
    "phase",
    "configuration",
    "model",
    "task_id",
    "family",
    "difficulty",
    "variation",
    "trial",
    "status",
    "strict_outcome",
)
"""The filters a link may carry that match one column of ``run_results`` exactly."""
COLUMNS = (
    "run_id",
    "configuration",
    "task_id",
    "variation",
    "trial",
    "status",
    "strict_outcome",
    "light_outcome",
    "failure_modes",
    "tool_calls",
    "total_tokens",
    "duration_ms",
)


def run_filter(query: Mapping[str, str]) -> tuple[str, list[Any]]:
    """The WHERE clause and its parameters for the filters in ``query`` (unknown names are ignored):
    a value is always a bound parameter, never SQL."""
    terms, params = [], []
    for name in EQUAL:
        if name in query:
            terms.append(f"CAST({name} AS VARCHAR) = ?")
            params.append(query[name])
    if "failure_mode" in query:
        terms.append("list_contains(failure_modes, ?)")
        params.append(query["failure_mode"])
    if "strict" in query:
        terms.append("CAST(strict AS VARCHAR) = ?")
        params.append(query["strict"])
    if "versus" in query:  # the runs whose strict outcome differs from the other configuration's same run
        terms.append(
            "EXISTS (SELECT 1 FROM run_results y WHERE y.configuration = ? AND y.task_id = run_results.task_id"
            " AND y.variation = run_results.variation AND y.trial = run_results.trial"
            " AND coalesce(y.experiment, '') = coalesce(run_results.experiment, '')"
            " AND coalesce(y.phase, '') = coalesce(run_results.phase, '') AND y.strict <> run_results.strict)"
        )
        params.append(query["versus"])
    if "tool" in query:
        terms.append(
            "run_id IN (SELECT run_id FROM events WHERE kind = 'ToolCalled' AND actor = 'agent'"
            " AND json_extract_string(payload, '$.tool') = ?)"
        )
        params.append(query["tool"])
    return " AND ".join(terms) or "true", params


def runs_page(reader: Any, query: Mapping[str, str], *, log_name: str) -> str:
    where, params = run_filter(query)
    try:
        offset = max(0, int(query.get("offset", "0")))
    except ValueError:
        offset = 0
    (total,) = reader.query(f"SELECT count(*) FROM run_results WHERE {where}", params)[1][0]
    _, rows = reader.query(
        f"SELECT {', '.join(COLUMNS)} FROM run_results WHERE {where} ORDER BY started_at, run_id LIMIT ? OFFSET ?",
        [*params, PAGE, offset],
    )
    body = []
    for row in rows:
        cells = [f'<td><a href="{run_href(row[0])}">{text(row[0])}</a></td>']
        for value in row[1:]:
            if isinstance(value, list):
                value = "+".join(map(str, value))
            numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
            cells.append(f"<td class=n>{text(value)}</td>" if numeric else f"<td>{text(value)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    shown = {k: v for k, v in query.items() if k != "offset"}
    said = ", ".join(f"{k} = {v}" for k, v in shown.items()) or "every run"
    pages = []
    if offset > 0:
        pages.append(f'<a href="{href("/runs", {**shown, "offset": max(0, offset - PAGE)})}">← earlier</a>')
    if offset + PAGE < total:
        pages.append(f'<a href="{href("/runs", {**shown, "offset": offset + PAGE})}">later →</a>')
    head = "".join(f"<th>{text(c)}</th>" for c in COLUMNS)
    table = (
        f'<div class="scroll"><table class="data runs"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody>'
        "</table></div>"
        if rows
        else '<p class="note">no runs</p>'
    )
    content = (
        f'<p><a href="/">← report</a></p><section><h2>{total} runs: {text(said)}</h2>'
        f'<p class="note">Runs {offset + 1 if rows else 0}–{offset + len(rows)} of {total}, in the order they '
        f"started; the filter box searches this page. {' · '.join(pages)}</p>{table}</section>"
    )
    return page(f"runs: {said}", "runs", f"log {text(log_name)} · {text(said)}", content)
