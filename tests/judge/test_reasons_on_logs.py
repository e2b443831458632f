"""Every verdict that did not pass says why in words, on runs recorded through the real stack.

The scenario log holds one run of every built-in write-verification scenario (ensure_record, the oracle and
state_drift fail there in every way the scenarios provoke); the suite log holds every task's gold run and a
mutant of it (strict and the failure-mode classifier fail there). No verdict of fae's own judges may fall
back to its raw evidence or to a bare problem code.
"""

from __future__ import annotations

import json

import duckdb
from typer.testing import CliRunner

from fae.cli import app
from fae.judge.verify import RULE_NAMES
from fae.report.reasons import verdict_reasons

runner = CliRunner()

# the codes and harm names a judge writes: a reason that is only one of them, spaced, was not put in words
CODES = {
    *RULE_NAMES,  # ensure_record's problems
    "state_check_failed",  # the oracle's harms
    "record_wrong_at_end",
    "duplicate_person",
    "collateral_change",
    "exposed_while_wrong",
    "lost_update",
    "deleted_on_the_way",
    "was_another_person",
    "unrecorded_change",
}
BARE = {code.replace("_", " ") for code in CODES}


def _unpassed(log) -> list[tuple[str, str, str, bool | None, str]]:
    with duckdb.connect(str(log), read_only=True) as db:
        return db.execute(
            "SELECT run_id, judge, outcome, passed, evidence FROM verdicts"
            " WHERE passed IS NOT TRUE AND outcome <> 'not_applicable' ORDER BY run_id, judge"
        ).fetchall()


def _all_in_words(rows) -> list[str]:
    """Each verdict with no reason, a raw-evidence reason or a bare code, with the evidence it was given."""
    bad = []
    for run_id, judge, outcome, passed, evidence in rows:
        lines = verdict_reasons(judge, outcome, passed, evidence)
        if (
            not lines
            or lines == ["no reason in its evidence"]
            or any(line.startswith("{") or line in BARE for line in lines)
            or any(part in BARE for line in lines for part in line.split("; "))
        ):
            bad.append(f"{run_id} {judge} {outcome}: {lines} from {evidence}")
    return bad


def test_every_unpassed_verdict_of_every_scenario_says_why_in_words(scenario_log):
    rows = _unpassed(scenario_log)
    judges = {judge for _, judge, *_ in rows}
    assert {"ensure_record", "oracle"} <= judges, f"the scenarios must make these judges fail: {judges}"
    bad = _all_in_words(rows)
    assert not bad, "\n".join(bad)


def test_every_unpassed_verdict_of_the_suite_and_its_mutants_says_why_in_words(suite_log):
    log, _ = suite_log
    rows = _unpassed(log)
    assert {"task", "failure_mode"} <= {judge for _, judge, *_ in rows}
    bad = _all_in_words(rows)
    assert not bad, "\n".join(bad)


def test_a_strict_failure_keeps_the_check_s_own_sentence(suite_log):
    log, _ = suite_log
    rows = [row for row in _unpassed(log) if row[1] == "task"]
    assert rows
    for run_id, judge, outcome, passed, evidence in rows:
        first = json.loads(evidence)["reasons"][0]
        shown = verdict_reasons(judge, outcome, passed, evidence)[0]
        assert shown == " ".join(first.split())[: len(shown) - 1] + "…" or shown == " ".join(first.split()), run_id


def _scenario(log, name: str) -> str:
    with duckdb.connect(str(log), read_only=True) as db:
        found = db.execute("SELECT run_id FROM runs WHERE agent = ?", [f"scenario:{name}"]).fetchall()
    assert found, f"no run of scenario {name}"
    return found[0][0]


def test_show_and_runs_say_which_element_was_wrong_and_what_the_server_held(scenario_log):
    run_id = _scenario(scenario_log, "fault-after-create")
    shown = runner.invoke(app, ["show", run_id, "--log", str(scenario_log)])
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    verdict = next(i for i, line in enumerate(lines) if line.startswith("verdict ensure_record"))
    assert "needs_review" in lines[verdict], lines[verdict]
    assert (
        "does not hold the values asked for: telecom.value: expected 555-0100, found 555-9900" in lines[verdict + 1]
    ), shown.output
    assert "was also written by fault" in lines[verdict + 2], shown.output
    listed = runner.invoke(app, ["runs", "--log", str(scenario_log), "--runs", run_id])
    assert listed.exit_code == 0, listed.output
    row = next(i for i, line in enumerate(listed.output.splitlines()) if line.startswith(run_id))
    assert "telecom.value: expected 555-0100, found 555-9900" in listed.output.splitlines()[row + 1], listed.output
