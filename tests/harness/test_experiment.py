"""`fae experiment run` end to end and offline: exp1-exp4 reduced with --tasks, on the local scripted LLM server.

The local server plays each task variation's gold plan: the test registers the plans the way
fae/harness/demo.py does (matched on a line of the task's body, which the scripted paraphrase keeps).
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from fae.cli.main import app
from fae.harness.experiment import store_root
from fae.harness.experiment_phases import eval_specs, experiment_phases, load_experiment, task_list, with_overrides
from fae.harness.worklist import render_task
from fae.llm import LlmServer, PlanRegistry, create_app, entry_from_dict
from fae.plan import plan_to_dict
from fae.store.log import EventLog

runner = CliRunner()
REDUCED = [
    "--tasks",
    "1",
    "--trials",
    "2",
    "--model",
    "scripted:gold",
    "--paraphrase-model",
    "scripted:paraphrase",
    "--evaluator-model",
    "scripted:evaluator",
    "--reflector-model",
    "scripted:reflector",
]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # the module fixture records four experiments


def _registry(names: list[str]) -> PlanRegistry:
    registry = PlanRegistry()
    seen: set[str] = set()
    for name in names:
        experiment = with_overrides(load_experiment(name), tasks=1)
        phases = [experiment.evaluation] + ([experiment.training] if experiment.training else [])
        for phase in phases:
            for task_id in task_list(phase):
                for variation in phase.variations:
                    rendered = render_task(task_id, variation)
                    line = rendered.prompt.split("\n\n", 1)[1].strip().splitlines()[0]
                    if line in seen:
                        continue
                    seen.add(line)
                    registry.add(entry_from_dict({"match": line, "plan": plan_to_dict(rendered.gold_plan)}))
    return registry


def _run(log, llm_url, *args):
    result = runner.invoke(app, ["experiment", "run", *args, "--log", str(log), "--llm-url", llm_url, *REDUCED])
    return result


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    log = tmp_path_factory.mktemp("experiments") / "study.duckdb"
    names = ["exp1", "exp2", "exp3", "exp4"]
    with LlmServer(create_app(_registry(names))) as llm:
        outputs = {}
        for name in names:
            result = _run(log, llm.base_url, name)
            if result.exit_code == 2:
                # a run failed on fae's side (its error is printed): --resume records that spec again,
                # and the study counts only the new attempt
                print(f"{name}: resuming after runs that did not finish:\n{result.output[-1500:]}")
                result = _run(log, llm.base_url, name, "--resume")
            assert result.exit_code == 0, f"{name}: {result.output}"
            outputs[name] = result.output
        again = _run(log, llm.base_url, "exp1")
        resumed = _run(log, llm.base_url, "exp1", "--resume")
    return log, outputs, again, resumed


def test_every_run_carries_its_experiment_phase_configuration_and_trial(recorded):
    log, _, _, _ = recorded
    with EventLog(log, read_only=True) as opened:
        _, rows = opened.query("SELECT experiment, phase, count(*) FROM run_results GROUP BY ALL ORDER BY ALL")
        counts = {(e, p): n for e, p, n in rows}
        _, unnamed = opened.query("SELECT count(*) FROM runs WHERE experiment IS NULL OR phase IS NULL")
    assert unnamed == [(0,)]
    for name in ("exp1", "exp2", "exp3", "exp4"):
        experiment = with_overrides(load_experiment(name), tasks=1, trials=2, model="scripted:gold")
        planned = {p.phase: p for p in experiment_phases(experiment)}
        assert counts[(name, "eval")] == planned["eval"].runs == len(eval_specs(experiment))
        # the gold agent passes at once, so each training variation takes one trial
        for store in ("nospec", "spec"):
            train = planned[f"train-{store}"]
            assert counts[(name, f"train-{store}")] == len(train.tasks) * len(train.variations)
            assert (store_root(log, name) / store / "trained.json").exists()


def test_the_evaluation_passes_and_paraphrases_where_the_experiment_says(recorded):
    log, _, _, _ = recorded
    with EventLog(log, read_only=True) as opened:
        _, rows = opened.query(
            "SELECT experiment, bool_and(strict), bool_and(paraphrased), bool_or(paraphrased), count(*),"
            " count(DISTINCT configuration), count(DISTINCT trial), min(family) IS NOT NULL"
            " FROM run_results WHERE phase = 'eval' GROUP BY ALL ORDER BY ALL"
        )
        _, failing = opened.query(
            "SELECT run_id, status, strict_outcome, failure_mode, error FROM run_results"
            " WHERE phase = 'eval' AND NOT strict"
        )
    assert not failing, f"runs that did not pass: {failing}"
    by_name = {r[0]: r[1:] for r in rows}
    for name in ("exp1", "exp2"):
        assert by_name[name][:3] == (True, False, False), (name, by_name[name])
    for name in ("exp3", "exp4"):
        assert by_name[name][:3] == (True, True, True), (name, by_name[name])
    assert all(r[4:] == (5, 2, True) for r in by_name.values()), by_name


def test_paraphrasing_experiments_ask_once_per_variation_and_every_run_of_it_plays_that_paraphrase(recorded):
    log, _, _, _ = recorded
    with EventLog(log, read_only=True) as opened:
        _, played = opened.query(
            "SELECT r.experiment, r.task_id, r.variation, count(*), count(DISTINCT e.payload->>'$.digest'),"
            " any_value(e.payload->>'$.made_in') FROM runs r JOIN events e USING (run_id)"
            " WHERE e.kind = 'PromptParaphrased' GROUP BY ALL ORDER BY ALL"
        )
        _, requests = opened.query(
            "SELECT run_id FROM events WHERE kind = 'LlmCalled' AND actor = 'harness'"
            " AND payload->>'$.model' = 'scripted:paraphrase' ORDER BY run_id"
        )
    assert {row[0] for row in played} == {"exp3", "exp4"}
    # training (2 trials at most, 1 at a pass) and evaluation (5 configurations x 2 trials) share it
    assert all(runs >= 1 and digests == 1 for _, _, _, runs, digests, _ in played), played
    assert any(runs >= 10 for _, _, _, runs, _, _ in played), played
    # one request per variation, whichever experiment and phase first needed it (the two share model and seed)
    assert sorted(r for (r,) in requests) == sorted({made for *_, made in played})


def test_exp4_evaluates_only_tasks_training_never_saw(recorded):
    log, _, _, _ = recorded
    with EventLog(log, read_only=True) as opened:
        _, rows = opened.query(
            "SELECT phase LIKE 'train%', list(DISTINCT task_id) FROM runs WHERE experiment = 'exp4' GROUP BY ALL"
        )
    seen = {train: set(tasks) for train, tasks in rows}
    assert seen[True] and seen[False] and not seen[True] & seen[False]


def test_the_run_ends_with_a_results_table_and_stats_slice_by_experiment(recorded):
    log, outputs, _, _ = recorded
    assert "Runs and outcomes per configuration" in outputs["exp2"] and "langchain:memory-spec" in outputs["exp2"]
    result = runner.invoke(
        app,
        [
            "stats",
            "--log",
            str(log),
            "--experiment",
            "exp3",
            "--phase",
            "eval",
            "--json",
            "--table",
            "success",
            "--table",
            "pass_k",
        ],
    )
    assert result.exit_code == 0, result.output
    found = json.loads(result.output)
    overall = [r for r in found["success"]["rows"] if r["slice"] == "all"]
    assert len(overall) == 5 and all(r["strict_mean"] == 100.0 and r["experiment"] == "exp3" for r in overall)
    assert {r["k"] for r in found["pass_k"]["rows"]} == {1, 2}


def test_an_experiment_already_in_the_log_needs_resume_and_resume_records_nothing_done(recorded):
    log, _, again, resumed = recorded
    assert again.exit_code == 1 and "already holds runs of experiment exp1" in again.output
    assert resumed.exit_code == 0, resumed.output
    with EventLog(log, read_only=True) as opened:
        _, rows = opened.query("SELECT count(*) FROM run_results WHERE experiment = 'exp1'")
    experiment = with_overrides(load_experiment("exp1"), tasks=1, trials=2)
    assert rows[0][0] == sum(p.runs if p.phase == "eval" else len(p.tasks) for p in experiment_phases(experiment))


def test_resume_continues_with_more_trials_and_keeps_the_trained_stores(tmp_path):
    log = tmp_path / "resume.duckdb"
    with LlmServer(create_app(_registry(["exp1"]))) as llm:
        first = runner.invoke(
            app,
            [
                "experiment",
                "run",
                "exp1",
                "--log",
                str(log),
                "--llm-url",
                llm.base_url,
                *REDUCED[:2],
                "--trials",
                "1",
                *REDUCED[4:],
                "--agent",
                "langchain:baseline",
            ],
        )
        assert first.exit_code in (0, 2), first.output  # 2: a run failed on fae's side; the resume redoes it
        second = runner.invoke(
            app,
            [
                "experiment",
                "run",
                "exp1",
                "--log",
                str(log),
                "--llm-url",
                llm.base_url,
                *REDUCED,
                "--agent",
                "langchain:baseline",
                "--resume",
            ],
        )
        assert second.exit_code == 0, second.output
    with EventLog(log, read_only=True) as opened:
        _, rows = opened.query("SELECT phase, list(trial ORDER BY trial) FROM run_results GROUP BY ALL ORDER BY ALL")
    assert dict(rows) == {"eval": [0, 1], "train-nospec": [0], "train-spec": [0]}


def test_dry_run_prints_the_plan_and_records_nothing(tmp_path):
    log = tmp_path / "dry.duckdb"
    result = runner.invoke(app, ["experiment", "run", "exp2", "--log", str(log), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "train-nospec" in result.output and "eval" in result.output
    assert f"{196 + 196 + 2205} runs at most" in result.output
    assert not log.exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["nope"], "no experiment file 'nope'"),
        (["exp1", "--tasks", "0"], "--tasks must be at least 1"),
    ],
)
def test_bad_experiments_are_one_line(tmp_path, args, message):
    result = runner.invoke(app, ["experiment", "run", *args, "--log", str(tmp_path / "x.duckdb"), "--dry-run"])
    assert result.exit_code == 1 and message in result.output, result.output


def test_an_experiment_file_naming_an_unknown_task_is_refused(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("name: mine\nconfigurations: [gold]\nevaluation: {tasks: [no-such-task], variations: [0]}\n")
    result = runner.invoke(app, ["experiment", "run", str(path), "--dry-run"])
    assert result.exit_code == 1 and "unknown task 'no-such-task'" in result.output, result.output
    path.write_text("name: mine\nconfigurations: [gold]\nevaluation: {tasks: all}\nextra: 1\n")
    result = runner.invoke(app, ["experiment", "run", str(path), "--dry-run"])
    assert result.exit_code == 1 and "extra" in result.output, result.output
