"""Whether a task variation writes reaches ``task_meta.writes`` (and so ``run_results.writes``, which the
report's light success over write tasks reads), for suite tasks and for the tasks the suite does not hold."""

from __future__ import annotations

from fae.harness.task_meta import materialise_task_meta, task_meta_row
from fae.store.log import EventLog
from fae.tasks.fixture import BUILTIN_TASK
from fae.tasks.scenarios import TASK_ID as SCENARIO_TASK


def test_a_suite_task_says_what_its_metadata_says():
    assert task_meta_row("rec-create-patient", 0).writes is True
    assert task_meta_row("rec-find-patient", 0).writes is False


def test_tasks_outside_the_suite_write_when_their_kept_task_names_a_target_or_their_plan_writes():
    assert task_meta_row(SCENARIO_TASK, 0).writes is True  # the scenario names the record it asks for
    assert task_meta_row(BUILTIN_TASK, 0).writes is True  # the built-in task's gold plan creates a Patient
    assert task_meta_row("no-such-task", 0).writes is None  # unknown: never counted as a read task


def test_the_log_keeps_it(tmp_path):
    with EventLog(tmp_path / "meta.duckdb") as log:
        materialise_task_meta(log, [("rec-create-patient", 0), ("rec-find-patient", 0)])
        _, rows = log.query("SELECT task_id, writes FROM task_meta ORDER BY task_id")
    assert rows == [("rec-create-patient", True), ("rec-find-patient", False)]
