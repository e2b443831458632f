"""The soft validator over real HTTP: the judge call is recorded, and curating again reuses it offline."""

from __future__ import annotations

import functools
import json

import anyio
import pytest
from typer.testing import CliRunner

from fae.cli import app
from fae.errors import JudgeError
from fae.harness.curate import JUDGE_NAME, curate_log
from fae.llm import LlmServer, PlanRegistry, create_app, entry_from_dict
from fae.store.log import EventLog

TASK = "rec-record-condition"
MATCH = "to the medical history of patient"


@pytest.fixture
def recorded(tmp_path):
    """A log with two runs of one task: the gold agent (passes) and a wrong answer (fails)."""
    from fae.harness.suite_runner import record_suite
    from fae.harness.worklist import suite_specs

    wrong = tmp_path / "wrong.yaml"
    wrong.write_text(json.dumps({"name": "wrong", "steps": [{"answer": "<CONDITION>none</CONDITION>"}]}))
    log_path = tmp_path / "fae.duckdb"
    specs = suite_specs([TASK], [0], ["gold", f"plan:{wrong}"], 1, "curate")
    anyio.run(functools.partial(record_suite, log_path, specs))
    return log_path, [s.run_id for s in specs]


def soft_rows(log_path):
    with EventLog(log_path, read_only=True) as log:
        _, rows = log.query(
            "SELECT run_id, outcome, passed, evidence FROM verdicts WHERE judge = ? ORDER BY judged_at, run_id",
            [JUDGE_NAME],
        )
    return [(r, o, p, json.loads(e)) for r, o, p, e in rows]


@pytest.mark.anyio
async def test_label_is_recorded_then_reused_without_the_model(recorded):
    log_path, (gold_run, wrong_run) = recorded
    registry = PlanRegistry(
        [entry_from_dict({"match": MATCH, "judge": {"label": "validator_too_strict", "reason": "scripted"}})]
    )
    with LlmServer(create_app(registry)) as llm:
        first = await curate_log(log_path, llm_url=llm.base_url)
    assert (first.called, first.reused) == (2, 0)
    assert {row.outcome for row in first.rows} == {"validator_too_strict"}
    strict = {row.run_id: row.evidence["strict_passed"] for row in first.rows}
    assert strict == {gold_run: True, wrong_run: False}
    # the judge's call is in the log, as the verifier of the run it judged
    with EventLog(log_path, read_only=True) as log:
        _, calls = log.query(
            "SELECT run_id, payload->>'$.exchange_id', payload->>'$.model' FROM events "
            "WHERE kind = 'LlmCalled' AND actor = 'verifier' ORDER BY run_id",
            [],
        )
    assert {(run, model) for run, _, model in calls} == {(gold_run, "scripted:judge"), (wrong_run, "scripted:judge")}
    assert {row.evidence["exchange_id"] for row in first.rows} == {exchange for _, exchange, _ in calls}

    # the LLM server is stopped now: curating again must read the recorded replies
    again = await curate_log(log_path, llm_url="http://127.0.0.1:9/v1")
    assert (again.called, again.reused) == (0, 2)
    assert [r.outcome for r in again.rows] == [r.outcome for r in first.rows]
    rows = soft_rows(log_path)
    assert len(rows) == 4  # appended, never edited
    assert [e["reused"] for _, _, _, e in rows] == [False, False, True, True]


@pytest.mark.anyio
@pytest.mark.anyio
async def test_labels_follow_the_judge(recorded):
    log_path, _ = recorded
    registry = PlanRegistry([entry_from_dict({"match": MATCH, "judge": {"label": "no-such-label"}})])
    with LlmServer(create_app(registry)) as llm:
        result = await curate_log(log_path, llm_url=llm.base_url, runs="*gold*")
    assert [(r.outcome, r.passed) for r in result.rows] == [("error", None)]
    assert "not one of" in result.rows[0].evidence["error"]


@pytest.mark.anyio
async def test_no_model_and_nothing_recorded_is_a_clear_error(recorded):
    log_path, _ = recorded
    with pytest.raises(JudgeError, match="no recorded soft verdict"):
        await curate_log(log_path)


def test_cli(recorded):
    log_path, _ = recorded
    with LlmServer(create_app(PlanRegistry([]))) as llm:
        result = CliRunner().invoke(app, ["curate", "--log", str(log_path), "--llm-url", llm.base_url])
    assert result.exit_code == 0, result.output
    assert "agreement: 2" in result.output and "2 asked, 0 reused" in result.output


def _played_another_prompt(log_path, run_id):
    """The run's log says it was shown another prompt: as if recorded, before runs kept their task in the log,
    before its task was reworded."""
    with EventLog(log_path) as log:
        log.con.execute("DELETE FROM events WHERE run_id = ? AND kind = 'TaskRendered'", [run_id])
        _, rows = log.query("SELECT payload FROM events WHERE run_id = ? AND kind = 'RunStarted'", [run_id])
        payload = json.loads(rows[0][0])
        payload["prompt"] += "\nAn older wording."
        log.con.execute(
            "UPDATE events SET payload = ? WHERE run_id = ? AND kind = 'RunStarted'", [json.dumps(payload), run_id]
        )


def test_a_run_that_played_another_rendering_of_its_task_is_not_labelled(recorded):
    """Its strict verdict is task_changed: nothing to audit, and today's task definition is not what it was asked."""
    log_path, (gold_run, wrong_run) = recorded
    _played_another_prompt(log_path, wrong_run)
    with LlmServer(create_app(PlanRegistry([]))) as llm:
        result = anyio.run(functools.partial(curate_log, log_path, llm_url=llm.base_url))
        assert (result.called, result.task_changed) == (1, [wrong_run])
        assert [row.run_id for row in result.rows] == [gold_run]
        with pytest.raises(JudgeError, match="no run to label"):
            anyio.run(functools.partial(curate_log, log_path, llm_url=llm.base_url, runs=wrong_run))
        printed = CliRunner().invoke(app, ["curate", "--log", str(log_path), "--llm-url", llm.base_url])
    assert printed.exit_code == 0, printed.output
    assert "not labelled: 1 run(s) played another rendering" in printed.output
    assert [r for r, *_ in soft_rows(log_path)].count(wrong_run) == 0
