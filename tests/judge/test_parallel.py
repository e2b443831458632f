"""Rejudging on several worker processes gives exactly the verdicts of one process and of the in-memory path."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime

import pytest
from typer.testing import CliRunner

from bench.grow_log import grow
from fae.cli import app
from fae.errors import ReplayDrift
from fae.judge.compare import compare
from fae.judge.judging import judge_run, judges_to_run
from fae.judge.parallel import EVENTS_PER_WORKER, workers_default
from fae.judge.rejudge import rejudge
from fae.replay.source import load_runs, run_ids
from fae.store.live import LogReader
from fae.store.log import EventLog

runner = CliRunner()
CLOCK = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.fixture(scope="module")
def grown(scenario_log, tmp_path_factory):
    """The scenario log grown to 48 runs, each copy with its own bodies."""
    log = tmp_path_factory.mktemp("parallel") / "grown.duckdb"
    shutil.copy(scenario_log, log)
    assert grow(str(log), 48) == 48
    return log


def _batch(log, batch: str) -> list[tuple]:
    with EventLog(log, read_only=True) as opened:
        _, rows = opened.query(
            "SELECT run_id, judge, rule_set, rule_set_hash, code_version, outcome, passed,"
            " evidence, judged_at FROM verdicts WHERE batch = ? ORDER BY run_id, judge,"
            " rule_set_hash",
            [batch],
        )
    return [(*row[:2], json.loads(row[2]), *row[3:7], json.loads(row[7]), row[8]) for row in rows]


def test_two_workers_give_the_verdicts_of_one(grown, tmp_path):
    one, two = tmp_path / "one.duckdb", tmp_path / "two.duckdb"
    shutil.copy(grown, one)
    shutil.copy(grown, two)
    first = rejudge(one, workers=1, clock=lambda: CLOCK, full=True)
    second = rejudge(two, workers=2, clock=lambda: CLOCK, chunk=4, full=True)
    assert first.runs == second.runs == 48 and first.verdicts == second.verdicts == 48 * len(judges_to_run())
    assert first.outcomes == second.outcomes
    rows = _batch(one, first.batch)
    assert rows == _batch(two, second.batch)
    # and both are what judging each run in memory gives
    plan = judges_to_run()
    with EventLog(grown, read_only=True) as log:
        ids = run_ids(log)
        expected = sorted(
            (
                (
                    v.run_id,
                    v.judge,
                    v.rule_set,
                    v.rule_set_hash,
                    v.code_version,
                    v.outcome,
                    v.passed,
                    json.loads(json.dumps(v.evidence)),
                )
                for run in load_runs(log, ids, lean=True)
                for v in judge_run(run, plan, judged_at=CLOCK)
            ),
            key=lambda v: (v[0], v[1], v[3]),
        )
    assert [r[:8] for r in rows] == expected
    outcomes = {r[5] for r in rows if r[1] == "ensure_record"}
    assert {"created_verified", "needs_review"} <= outcomes, outcomes  # the runs are not all alike


def test_a_filtered_rejudge_on_workers_judges_only_the_filter(grown, tmp_path):
    log = tmp_path / "filtered.duckdb"
    shutil.copy(grown, log)
    result = rejudge(log, judge_name="ensure_record", runs="*.c1", workers=2, full=True)
    judged = {row[0] for row in _batch(log, result.batch)}
    assert judged and all(run_id.endswith(".c1") for run_id in judged) and result.runs == len(judged)


def test_compare_on_workers_matches_one_process(grown):
    with LogReader(grown) as reader:
        one = compare(reader, {"accept_corrections": False}, {}, judge_name="ensure_record", workers=1)
        two = compare(reader, {"accept_corrections": False}, {}, judge_name="ensure_record", log_path=grown, workers=2)
    assert one.computed == two.computed > 0
    assert [(j.transitions, sorted(j.flipped), j.harms) for j in one.judges] == [
        (j.transitions, sorted(j.flipped), j.harms) for j in two.judges
    ]
    assert any(j.flipped for j in two.judges)


def test_cli_workers(grown, tmp_path):
    log = tmp_path / "cli.duckdb"
    shutil.copy(grown, log)
    done = runner.invoke(app, ["rejudge", "--full", "--log", str(log), "--judge", "oracle", "--workers", "2"])
    assert done.exit_code == 0, done.output
    assert "rejudged 48 runs" in done.output
    for command in (["rejudge"], ["compare", "--old", "", "--new", "accept_corrections=false"]):
        failed = runner.invoke(app, [*command, "--log", str(log), "--workers", "0"])
        assert failed.exit_code == 1, failed.output
        flat = " ".join(failed.output.split())
        assert flat.startswith("error:") and "--workers must be at least 1" in flat and "Traceback" not in flat


def test_a_run_no_worker_can_read_stops_the_rejudge_and_nothing_is_written(grown, tmp_path):
    """One unreadable event in one shard: the error names the run and seq, and no verdict of any shard lands."""
    log = tmp_path / "broken.duckdb"
    shutil.copy(grown, log)
    with EventLog(log) as opened:
        opened.con.execute(
            'UPDATE events SET payload = \'{"type": "NoSuchEvent"}\''
            " WHERE run_id = (SELECT max(run_id) FROM runs) AND seq = 2"
        )
        _, [(before,)] = opened.query("SELECT count(*) FROM verdicts")
    with pytest.raises(ReplayDrift, match=r"cannot be decoded") as caught:
        rejudge(log, workers=2, full=True)
    assert caught.value.seq == 2 and caught.value.run_id
    with EventLog(log, read_only=True) as opened:
        assert opened.query("SELECT count(*) FROM verdicts")[1] == [(before,)]


_FORKSERVER_PROBE = """
import sys
from multiprocessing import forkserver
from fae.judge import parallel, ray_judge, rejudge

def running():
    return forkserver._forkserver._forkserver_pid is not None  # private, but the one place the state is kept

parallel.start_workers(1, 10_000)
parallel.start_workers(None, 10)  # ten runs are judged on one process by default
print("after one-worker calls:", running())
seen = []
judge = parallel.run_shards
def watched(jobs, workers):
    seen.append(running())
    return judge(jobs, workers)
ray_judge.run_shards = watched  # what judge_jobs calls for local workers
result = rejudge.rejudge(sys.argv[1], workers=2, full=True)
print("when the shards began:", seen, "judged:", result.runs)
"""


def test_the_worker_process_starts_before_the_shards_are_made(grown, tmp_path):
    """`fae rejudge --workers 2` starts the forkserver as soon as it knows the runs, so its import of fae runs
    beside the parent's own preparation rather than delaying the first worker; one worker never starts it."""
    log = tmp_path / "early.duckdb"
    shutil.copy(grown, log)
    # a fresh interpreter: the forkserver is one per process, and this test process may have started it already
    done = subprocess.run([sys.executable, "-c", _FORKSERVER_PROBE, str(log)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "after one-worker calls: False" in done.stdout, done.stdout
    assert "when the shards began: [True] judged: 48" in done.stdout, done.stdout


def test_the_default_starts_a_worker_only_for_enough_events_to_pay_for_it(scenario_log, tmp_path, monkeypatch):
    """A small log is judged on one worker by default (two were slower there); a large one on every core."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: {0, 1, 2, 3}, raising=False)
    assert workers_default(events=0) == 1
    assert workers_default(events=2 * EVENTS_PER_WORKER - 1) == 1
    assert workers_default(events=2 * EVENTS_PER_WORKER) == 2
    assert workers_default(events=100 * EVENTS_PER_WORKER) == 4
    log = tmp_path / "small.duckdb"
    shutil.copy(scenario_log, log)
    result = rejudge(log, full=True)  # no --workers: the default
    assert len(result.shards) == 1 and result.runs > 1, result.shards
