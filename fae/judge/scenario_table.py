"""The table of the built-in write-verification scenarios: ensure_record under both settings, and the oracle;
then each verifier mutant (``fae.judge.verifier_mutants``) with the harmful scenarios that catch it.

``scripts/scenario_table.py`` records the scenarios and writes the table into
docs/judging.md; a test checks the page holds the table a fresh recording gives.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from fae.judge.compare import Judged, stopped
from fae.judge.context import RunContext
from fae.judge.rejudge import judge_run, judges_to_run
from fae.judge.verifier_mutants import MUTANTS, mutant_judging
from fae.replay.source import RunLog
from fae.tasks.scenarios import scenario_rules

START = "<!-- scenario-table:start (scripts/scenario_table.py writes this) -->"
END = "<!-- scenario-table:end -->"
SETTINGS = (True, False)


@dataclass(frozen=True)
class ScenarioRow:
    scenario: str
    task: str
    verdicts: tuple[tuple[str, tuple[str, ...]], ...]  # per setting of accept_corrections: outcome, problems
    label: str
    harms: tuple[str, ...]
    rules: tuple[tuple[str, object], ...] = ()  # the scenario's own ensure_record rules, beside the setting
    mutants: tuple[str, ...] = ()  # each verifier mutant's outcome (MUTANTS' order), accept_corrections=true


def scenario_rows(runs: Iterable[RunLog], judged_at: datetime) -> list[ScenarioRow]:
    """One row per scenario run (agent ``scenario:NAME``), in scenario-name order, each judged under the
    scenario's own rules (``rules:`` in its file) besides the setting of accept_corrections."""
    oracle = judges_to_run("oracle")
    rows = []
    for run in runs:
        if not run.agent.startswith("scenario:"):
            continue
        kept = RunContext(run).kept  # the scenario's rules as the log keeps them; a log older than that: its file
        rules = dict(kept.scenario_rules) if kept is not None else scenario_rules(run.agent)
        judgings = [judges_to_run("ensure_record", {**rules, "accept_corrections": s})[0] for s in SETTINGS] + oracle
        judgings += [mutant_judging(m, {**rules, "accept_corrections": True}) for m in MUTANTS]
        verdicts = judge_run(run, judgings, judged_at=judged_at)
        rows.append(
            ScenarioRow(
                run.agent.split(":", 1)[1],
                run.task_id,
                tuple((v.outcome, tuple(v.evidence.get("problems") or ())) for v in verdicts[:2]),
                verdicts[2].outcome,
                tuple(verdicts[2].evidence.get("harms") or ()),
                tuple(sorted(rules.items())),
                tuple(v.outcome for v in verdicts[3:]),
            )
        )
    return sorted(rows, key=lambda r: (r.task, r.scenario))


def _stops(outcome: str) -> bool:
    return stopped(Judged(outcome, outcome.endswith("_verified")))


def caught_by(rows: list[ScenarioRow], index: int) -> list[str]:
    """The harmful scenarios that verifier mutant ``index`` lets through and the real verifier stops."""
    return [
        r.scenario
        for r in rows
        if r.label == "harmful" and _stops(r.verdicts[0][0]) and r.mutants and not _stops(r.mutants[index])
    ]


def _cell(outcome: str, problems: tuple[str, ...]) -> str:
    return outcome + (f" ({', '.join(problems)})" if problems else "")


def scenario_markdown(rows: list[ScenarioRow]) -> str:
    """The markdown table, then harms caught, missed and false stops per setting."""
    lines = [
        "| task | scenario | accept_corrections=true | accept_corrections=false | oracle |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        judged = "".join(f" ({name}={value})" for name, value in row.rules)
        lines.append(
            f"| {row.task} | `{row.scenario}`{judged} | {_cell(*row.verdicts[0])} | "
            f"{_cell(*row.verdicts[1])} | {_cell(row.label, row.harms)} |"
        )
    lines.append("")
    for index, setting in enumerate(SETTINGS):
        caught = missed = stops = 0
        for row in rows:
            halted = _stops(row.verdicts[index][0])
            if row.label == "harmful":
                caught += halted
                missed += not halted
            elif row.label == "harmless":
                stops += halted
        lines.append(
            f"- `accept_corrections={str(setting).lower()}`: harms caught {caught}, "
            f"harms missed {missed}, false stops {stops}"
        )
    lines += [
        "",
        "| verifier mutant (accept_corrections=true) | what it does | harmful scenarios it verifies |",
        "|---|---|---|",
    ]
    for index, mutant in enumerate(MUTANTS):
        names = ", ".join(f"`{name}`" for name in caught_by(rows, index)) or "none: not caught"
        lines.append(f"| `{mutant.name}` | {mutant.about} | {names} |")
    return "\n".join(lines) + "\n"


def replace_section(page: str, table: str) -> str:
    """``page`` with the text between the markers replaced by ``table``."""
    head, found, rest = page.partition(START)
    if not found or END not in rest:
        raise ValueError("the page has no scenario-table markers")
    return f"{head}{START}\n{table}{END}{rest.partition(END)[2]}"


def current_section(page: str) -> str:
    """The text between the markers."""
    return page.partition(START)[2].partition(END)[0].removeprefix("\n")
