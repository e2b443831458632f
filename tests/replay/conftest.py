"""A small log recorded through the real stack: two suite tasks and three write scenarios."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "judge"))

from recording import record_runs, scenario_runs

from fae.agents.scripted_agent import ScriptedAgent
from fae.harness.run import RunSpec
from tests.run_report import why_not_finished

TASKS = ("sched-book-appointment", "rec-create-patient")


@pytest.fixture(scope="session")
def replay_log(tmp_path_factory):
    from fae.tasks import load_suite

    log = tmp_path_factory.mktemp("replay") / "replay.duckdb"
    runs = scenario_runs(["scripted-fix", "delete-then-recreate", "unrecorded-write-behind-fix"])
    gold = ScriptedAgent(name="scripted:gold", plan=None)
    for task_id in TASKS:
        runs.append((RunSpec(f"{task_id}.v1.gold", task_id, 1, gold.name, 0), load_suite()[task_id].render(1), gold))
    statuses = anyio.run(record_runs, log, runs)
    assert set(statuses.values()) == {"finished"}, why_not_finished(log)
    return log
