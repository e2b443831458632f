"""One run's page: who ran what and how it ended, every verdict with its reasons in plain words and its
evidence, the timeline in time order, and the FHIR state diff from seed to end."""

from __future__ import annotations

from typing import Any

from fae.report.explorer.markup import href, page, pretty, text
from fae.report.explorer.state import state_html
from fae.report.explorer.timeline import timeline_html
from fae.report.run_verdicts import run_verdicts
from fae.util.json_text import json_or_text

FACTS = (
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
    "stop_reason",
    "error",
    "strict_outcome",
    "light_outcome",
    "failure_modes",
    "llm_calls",
    "tool_calls",
    "fhir_exchanges",
    "total_tokens",
    "duration_ms",
)


def _passed(passed: bool | None) -> str:
    if passed is None:
        return '<span class="unknown">not scored</span>'
    return '<span class="pass">pass</span>' if passed else '<span class="fail">fail</span>'


def _evidence(evidence: Any) -> str:
    evidence = json_or_text(evidence)
    if evidence in (None, {}, [], ""):
        return ""
    return f"<details><summary>evidence</summary>{pretty(evidence)}</details>"


def verdicts_html(reader: Any, run_id: str) -> str:
    shown = run_verdicts(reader, run_id)
    if not shown:
        return '<p class="note">No verdict: this run was not judged.</p>'
    rows = []
    for verdict in shown:
        reasons = "".join(f"<li>{text(reason)}</li>" for reason in verdict.reasons)
        rows.append(
            f"<tr><td>{text(verdict.judge)}</td><td>{text(verdict.rules)}</td><td>{text(verdict.outcome)}</td>"
            f"<td>{_passed(verdict.passed)}</td><td>{f'<ul>{reasons}</ul>' if reasons else ''}"
            f"{_evidence(verdict.evidence)}</td><td>{text(verdict.batch)}</td></tr>"
        )
    return (
        '<div class="scroll"><table class="data"><thead><tr><th>judge</th><th>rule set</th><th>outcome</th>'
        f"<th>passed</th><th>why</th><th>batch</th></tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


def _fact(value: Any) -> Any:
    """A list (failure modes) as its items joined the way run_results prints them, none when empty."""
    return ("+".join(map(str, value)) or "none") if isinstance(value, list) else value


def _facts(reader: Any, run_id: str) -> dict[str, Any]:
    columns, rows = reader.query(f"SELECT {', '.join(FACTS)} FROM run_results WHERE run_id = ?", [run_id])
    if rows:
        return dict(zip(columns, rows[0], strict=True))
    columns, rows = reader.query(  # a run the results leave out (a retried attempt) still has its own row
        "SELECT experiment, phase, agent AS configuration, task_id, variation, status, stop_reason, error"
        " FROM runs WHERE run_id = ?",
        [run_id],
    )
    return dict(zip(columns, rows[0], strict=True)) if rows else {}


def run_page(reader: Any, run_id: str, *, log_name: str) -> str | None:
    """The page of ``run_id``, or None when the log has no such run."""
    facts = _facts(reader, run_id)
    if not facts:
        return None
    listed = "".join(
        f"<tr><th>{text(name)}</th><td>{text(_fact(value))}</td></tr>"
        for name, value in facts.items()
        if value is not None
    )
    timeline, count = timeline_html(reader, run_id)
    back = href("/runs", {k: facts.get(k) for k in ("configuration", "task_id")})
    body = (
        f'<p><a href="/">← report</a> · <a href="{back}">runs of this configuration and task</a></p>'
        f'<section id="facts"><h2>Run</h2><table class="facts">{listed}</table></section>'
        f'<section id="verdicts"><h2>Verdicts and why</h2>{verdicts_html(reader, run_id)}</section>'
        f'<section id="timeline"><h2>Timeline ({count} events)</h2>{timeline}</section>'
        f'<section id="state"><h2>FHIR state: seed → end</h2>{state_html(reader, run_id)}</section>'
    )
    subtitle = f"log {text(log_name)} · task {text(facts.get('task_id'))} · {text(facts.get('status'))}"
    return page(f"run {run_id}", f"run {run_id}", subtitle, body)
