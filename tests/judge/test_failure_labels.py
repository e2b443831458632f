"""The failure-mode labels a researcher reads, on runs recorded through the real stack (proxy, embedded FHIR, MCP).

Five scripted agents play one booking task: the gold plan; an answer with no tool call; the two searches and an
answer (wrong tools, wrong order); the same two searches and then a plan that breaks (the run errors); and the
gold calls tangled (the slot marked busy before the booking, a failing read, a prohibited delete). Each label has
a run that must get it and one that must not; rejudging gives the live verdicts again, and a log whose verdicts
an older fae wrote (the first mode only, and an agent mode for the errored run) still reads and rejudges.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from datetime import UTC, datetime

import anyio
import pytest
from recording import record_runs

from fae.agents.scripted_agent import ScriptedAgent
from fae.harness.run import RunSpec
from fae.judge.judging import judge_run, judges_to_run
from fae.judge.rejudge import rejudge
from fae.plan import AnswerStep, Plan, ToolStep
from fae.replay.source import load_runs
from fae.store.log import Batch, EventLog, VerdictRow
from fae.tasks import load_suite
from tests.run_report import why_not_finished

TASK = "sched-book-appointment"
ANSWER = "<APPOINTMENT>a-1</APPOINTMENT> <SLOT>s-1</SLOT>"


def _plans() -> dict[str, Plan | None]:
    gold = load_suite()[TASK].render(0).gold_plan
    doctor, slot, book, busy = (s for s in gold.steps if isinstance(s, ToolStep))
    searches = (doctor, slot)
    return {
        "gold": None,
        "no-call": Plan(name="no-call", steps=(AnswerStep(ANSWER),)),
        "searches": Plan(name="searches", steps=(*searches, AnswerStep("<SLOT>${slot.entry.0.resource.id}</SLOT>"))),
        "broken": Plan(name="broken", steps=(*searches, AnswerStep("<SLOT>${neverSaved.id}</SLOT>"))),
        "tangled": Plan(
            name="tangled",
            steps=(
                *searches,
                busy,
                book,
                ToolStep(call="getResourceById", args={"resourceType": "Appointment", "resourceId": "no-such"}),
                ToolStep(call="deleteResource", args={"resourceType": "Appointment", "resourceId": "no-such"}),
                AnswerStep("<APPOINTMENT>${appt.id}</APPOINTMENT> <SLOT>${slot.entry.0.resource.id}</SLOT>"),
            ),
        ),
    }


@pytest.fixture(scope="module")
def labelled(tmp_path_factory):
    """The five runs, recorded and judged live in one log."""
    log = tmp_path_factory.mktemp("labels") / "labels.duckdb"
    rendered = load_suite()[TASK].render(0)
    runs = [
        (
            RunSpec(f"{TASK}.v0.{name}", TASK, 0, f"scripted:{name}", 0),
            rendered,
            ScriptedAgent(f"scripted:{name}", plan),
        )
        for name, plan in _plans().items()
    ]
    statuses = anyio.run(record_runs, log, runs)
    assert statuses == {f"{TASK}.v0.{n}": "errored" if n == "broken" else "finished" for n in _plans()}, (
        why_not_finished(log)
    )
    return log


def _failure_modes(log, where: str = "true") -> dict[str, tuple]:
    with EventLog(log, read_only=True) as opened:
        _, rows = opened.query(
            "SELECT run_id, outcome, passed, evidence FROM latest_verdicts WHERE judge = 'failure_mode' AND " + where
        )
    return {
        run_id.rpartition(".")[2]: (outcome, passed, json.loads(evidence)) for run_id, outcome, passed, evidence in rows
    }


def _results(log) -> dict[str, tuple]:
    with EventLog(log, read_only=True) as opened:
        _, rows = opened.query("SELECT run_id, status, strict, failure_mode, failure_modes FROM run_results")
    return {run_id.rpartition(".")[2]: tuple(rest) for run_id, *rest in rows}


def test_each_label_goes_to_the_run_that_earned_it_and_no_other(labelled):
    found = _failure_modes(labelled)
    outcomes = {name: outcome for name, (outcome, _, _) in found.items()}
    assert outcomes == {
        "gold": "none",
        "no-call": "no_tool_call",
        "searches": "incorrect_tool_selection+incorrect_order",  # two modes of one run, both kept
        "broken": "errored",  # the same calls as "searches", but the run errored: no agent mode
        "tangled": "incorrect_order+prohibited_tool+tool_error",
    }, found
    outcome, passed, evidence = found["broken"]
    assert passed is None and evidence["modes"] == [] and evidence["stop_reason"] == "errored", evidence
    assert evidence["tools"] == ["searchResources", "searchResources"]  # what it did is still shown
    _, passed, evidence = found["no-call"]
    assert passed is False and evidence["modes"] == ["no_tool_call"] and evidence["tools"] == [], evidence
    # the modes are the outcome's parts, in the judge's order
    for name, (outcome, _, evidence) in found.items():
        if outcome not in ("none", "errored"):
            assert evidence["modes"] == outcome.split("+"), (name, evidence)


def test_run_results_lists_the_modes_and_leaves_the_errored_run_out(labelled):
    rows = _results(labelled)
    assert rows["broken"] == ("errored", False, "errored", None), rows  # still a failure of the success rate
    assert rows["no-call"][1:] == (False, "no_tool_call", ["no_tool_call"]), rows
    assert rows["searches"][3] == ["incorrect_tool_selection", "incorrect_order"], rows
    assert rows["gold"][1:] == (True, "none", []), rows


def test_rejudging_gives_the_live_labels_again(labelled, tmp_path):
    log = tmp_path / "labels.duckdb"
    shutil.copy(labelled, log)
    live = _failure_modes(log, "batch = 'live'")
    result = rejudge(log, judge_name="failure_mode", workers=1, full=True)
    again = _failure_modes(log, f"batch = '{result.batch}'")
    assert again == live  # the errored run too: live it is known by its answer's stop reason, later by its status


def test_a_log_an_older_fae_judged_reads_and_rejudges(labelled, tmp_path):
    """The previous code wrote the first mode only, an agent mode for the errored run, and one for the run with no
    tool call. The views read those verdicts as they are (the errored run by its status), and a rejudge relabels."""
    log = tmp_path / "older.duckdb"
    shutil.copy(labelled, log)
    older = {
        "broken": ("incorrect_tool_selection", ["incorrect_tool_selection", "incorrect_order"]),
        "no-call": ("incorrect_tool_selection", ["incorrect_tool_selection", "incorrect_order"]),
        "searches": ("incorrect_tool_selection", ["incorrect_tool_selection", "incorrect_order"]),
        "tangled": ("incorrect_order", ["incorrect_order", "prohibited_tool", "tool_error"]),
    }
    with EventLog(log) as opened:
        _, rows = opened.query(
            "SELECT run_id, judge, rule_set, rule_set_hash, code_version, outcome, passed, evidence, judged_at, batch"
            " FROM verdicts WHERE judge = 'failure_mode'"
        )
        opened.con.execute("DELETE FROM verdicts WHERE judge = 'failure_mode'")  # as if never judged by this fae
        rewritten = []
        for run_id, judge, rules, digest, _, outcome, passed, evidence, at, batch in rows:
            name = run_id.rpartition(".")[2]
            verdict = VerdictRow(
                run_id, judge, json.loads(rules), digest, "src-older", outcome, passed, json.loads(evidence), at, batch
            )
            if name in older:
                outcome, modes = older[name]
                verdict = dataclasses.replace(verdict, outcome=outcome, passed=False, evidence={"modes": modes})
            rewritten.append(verdict)
        opened.write_batch(Batch(verdicts=rewritten))
    rows = _results(log)
    assert rows["broken"][2:] == ("errored", None), rows
    assert rows["no-call"][2:] == ("incorrect_tool_selection", ["incorrect_tool_selection"]), rows
    assert rows["tangled"][2:] == ("incorrect_order", ["incorrect_order"]), rows
    rejudge(log, judge_name="failure_mode", workers=1, full=True)
    rows = _results(log)
    assert {name: row[2] for name, row in rows.items()} == {
        "gold": "none",
        "no-call": "no_tool_call",
        "searches": "incorrect_tool_selection+incorrect_order",
        "broken": "errored",
        "tangled": "incorrect_order+prohibited_tool+tool_error",
    }, rows


@pytest.mark.parametrize("status", ["failed", "interrupted", "errored"])
def test_a_run_a_side_ended_is_errored_by_its_status_alone(labelled, status):
    """fae never judges a run that failed or was interrupted (no verdict: left out everywhere), and an errored
    run's answer says it errored; still, judged through the API, a run whose status says it ended early gets no
    mode even where its answer does not say so. The same run finished keeps its modes."""
    with EventLog(labelled, read_only=True) as opened:
        [run] = load_runs(opened, [f"{TASK}.v0.searches"])
    plan = judges_to_run("failure_mode")
    at = datetime(2025, 1, 1, tzinfo=UTC)
    [finished] = judge_run(run, plan, judged_at=at)
    assert finished.outcome == "incorrect_tool_selection+incorrect_order", finished
    [ended] = judge_run(dataclasses.replace(run, status=status), plan, judged_at=at)
    assert (ended.outcome, ended.passed, ended.evidence["modes"]) == ("errored", None, []), ended
