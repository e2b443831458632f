"""A run idle about 5 s between seeding and state capture still finishes (no keep-alive race)."""

from __future__ import annotations

import random

import pytest

from fae.harness.config import RecordConfig
from fae.harness.suite_runner import record_suite
from fae.harness.worklist import suite_specs
from fae.tasks.fixture import BUILTIN_TASK
from tests.run_report import why_not_finished

RUNS = 48


@pytest.mark.anyio
async def test_runs_idle_around_the_keep_alive_timeout_all_finish(tmp_path):
    # uvicorn closes an idle connection after its keep-alive; the proxy reuses its pooled upstream
    # connection for the client's next request. Idling right around 5 s hit that window.
    rng = random.Random(5)
    agents = []
    for index in range(RUNS):
        plan = tmp_path / f"idle{index}.yaml"
        plan.write_text(f"steps:\n  - wait: {rng.uniform(4.8, 5.2):.3f}\n  - answer: done\n")
        agents.append(f"plan:{plan}")
    log_path = tmp_path / "idle.duckdb"
    result = await record_suite(log_path, suite_specs([BUILTIN_TASK], [0], agents, 1), RecordConfig(concurrency=RUNS))
    assert result.statuses["finished"] == RUNS, why_not_finished(log_path)
