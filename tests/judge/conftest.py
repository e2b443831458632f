"""Logs recorded once per session through the real stack: the task suite and the write scenarios."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from recording import BUILTIN_SCENARIOS, record_runs, scenario_runs, suite_runs

from tests.run_report import why_not_finished


@pytest.fixture(scope="session")
def suite_log(tmp_path_factory):
    """Every task's gold run plus one recorded mutation agent per task, judged live."""
    log = tmp_path_factory.mktemp("suite") / "suite.duckdb"
    runs, kinds = suite_runs()
    statuses = anyio.run(record_runs, log, runs)
    assert set(statuses.values()) <= {"finished", "errored"}, why_not_finished(log)
    return log, kinds


@pytest.fixture(scope="session")
def scenario_log(tmp_path_factory):
    """One run of each built-in write-verification scenario agent, judged live."""
    log = tmp_path_factory.mktemp("scenarios") / "scenarios.duckdb"
    statuses = anyio.run(record_runs, log, scenario_runs(BUILTIN_SCENARIOS))
    assert set(statuses.values()) == {"finished"}, why_not_finished(log)
    return log
