"""The contract every executor of a recording keeps: the same runs, statuses and verdicts as the in-process one,
a resume that records nothing twice, and a stop that starts no run.

``tests/harness/test_executors.py`` holds the in-process and worker-process executors to it,
``tests/harness/test_ray_record.py`` the Ray one (on the session's cluster).
"""

from __future__ import annotations

import signal
from pathlib import Path

from fae import api
from fae.harness.interrupt import StopRequest
from fae.harness.recording import Executor, record
from fae.harness.run import RunSpec
from fae.store.log import EventLog
from tests.run_report import why_not_finished

TASK = "rec-create-patient"
CONFIG = api.RecordConfig(concurrency=4)
Outcome = dict[tuple[int, str], tuple[str, str | None, tuple[tuple[str, str], ...]]]


def contract_runs(folder: Path) -> list[RunSpec]:
    """Runs of three kinds: gold (passes), a plan agent that writes nothing (finishes, fails its task) and a
    program that exits 3 (errored, the agent's cause) — two variations each."""
    lazy = folder / "lazy.yaml"
    lazy.write_text("steps:\n  - answer: nothing was needed\n")
    failing = "cmd:python3 -c 'raise SystemExit(3)'"
    return api.run_specs([TASK], variations=[0, 1], agents=["gold", f"plan:{lazy}", failing])


def outcomes(log: Path) -> Outcome:
    """Each run's (status, cause, verdicts), keyed by (variation, kind of agent): run ids name the agent's path."""
    with EventLog(log, read_only=True) as opened:
        _, runs = opened.query("SELECT run_id, variation, agent, status, cause FROM runs")
        _, verdicts = opened.query("SELECT run_id, judge, outcome FROM latest_verdicts ORDER BY judge")
    by_run: dict[str, list[tuple[str, str]]] = {}
    for run_id, judge, outcome in verdicts:
        by_run.setdefault(run_id, []).append((judge, outcome))
    return {
        (variation, agent.split(":")[0]): (status, cause, tuple(by_run.get(run_id, ())))
        for run_id, variation, agent, status, cause in runs
    }


def keeps_the_contract(folder: Path, executor: Executor, baseline: Outcome) -> None:
    """Record the contract's runs with ``executor``: the baseline's outcomes; a resume records nothing again."""
    log = folder / "contract.duckdb"
    runs = contract_runs(folder)
    result = record(log, runs, CONFIG, executor=executor)
    assert result.planned == 6 and len(result.runs) == 6, result
    assert result.statuses == {"finished": 4, "errored": 2}, why_not_finished(log)
    assert outcomes(log) == baseline, why_not_finished(log)
    again = record(log, runs, api.RecordConfig(resume=True), executor=executor)
    assert again.skipped == 6 and again.runs == [] and again.statuses == {}, again
    assert outcomes(log) == baseline


def stops_before_any_run(folder: Path, executor: Executor) -> None:
    """A stop asked for before the first run starts none of them; the next --resume records them all."""
    log = folder / "stopped.duckdb"
    runs = contract_runs(folder)
    stop = StopRequest()
    stop.request(int(signal.SIGTERM))
    result = record(log, runs, CONFIG, stop=stop, executor=executor)
    assert result.stopped is stop and result.runs == [] and not result.statuses, result
    assert outcomes(log) == {}
    # resumed in this process: which executor records what is left is the other tests' business
    again = record(log, runs, api.RecordConfig(resume=True, concurrency=4))
    assert again.skipped == 0 and again.statuses == {"finished": 4, "errored": 2}, why_not_finished(log)
