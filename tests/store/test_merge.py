"""fae log merge: shards come together once, blobs stored once, verdicts kept, different runs under one id refused."""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fae.cli import app
from fae.errors import StoreError
from fae.store.journal import Journal
from fae.store.log import Batch, EventLog, FactsRow, VerdictRow
from fae.store.merge import merge_logs

sys.path.insert(0, str(Path(__file__).parent))

from logs import T0
from logs import finished_run as _run
from logs import write_log as _shard

runner = CliRunner()


def _counts(path) -> dict[str, int]:
    with EventLog(path, read_only=True) as log:
        return {t: log.query(f"SELECT count(*) FROM {t}")[1][0][0] for t in ("runs", "events", "blobs", "verdicts")}


def test_shards_merge_once_with_blobs_deduplicated_and_verdicts_kept(tmp_path):
    a = _shard(tmp_path / "a.duckdb", _run("r1", body=b"one"), _run("r2", body=b"two"))
    b = _shard(tmp_path / "b.duckdb", _run("r3", body=b"three"))
    into = tmp_path / "all.duckdb"
    first = merge_logs([a, b], into)
    assert [(m.runs, m.events, m.verdicts, m.skipped_runs) for m in first] == [(2, 8, 2, 0), (1, 4, 1, 0)]
    assert first[0].blobs == 3 and first[1].blobs == 1  # the seed is shared: stored once
    assert _counts(into) == {"runs": 3, "events": 12, "blobs": 4, "verdicts": 3}
    with EventLog(into, read_only=True) as log:
        _, rows = log.query("SELECT run_id, events, answer FROM run_summary ORDER BY run_id")
    assert rows == [("r1", 4, "one"), ("r2", 4, "two"), ("r3", 4, "three")]
    # idempotent: the same shards again add nothing
    again = merge_logs([a, b, a], into)
    assert all(m.runs == m.events == m.blobs == m.verdicts == 0 for m in again)
    assert [m.skipped_runs for m in again] == [2, 1, 2]
    assert _counts(into) == {"runs": 3, "events": 12, "blobs": 4, "verdicts": 3}


def test_verdicts_added_to_a_shard_later_come_over_once(tmp_path):
    a = _shard(tmp_path / "a.duckdb", _run("r1"))
    into = tmp_path / "all.duckdb"
    merge_logs([a], into)
    with EventLog(a) as log:  # a rejudge on the shard after the first merge
        log.write_batch(
            Batch(
                verdicts=[VerdictRow("r1", "task", {"mode": "light"}, "h2", "v1", "fail", False, {}, T0, "rejudge-1")]
            )
        )
    assert merge_logs([a], into)[0].verdicts == 1
    assert merge_logs([a], into)[0].verdicts == 0
    assert _counts(into)["verdicts"] == 2


def test_a_shards_kept_findings_come_over_once(tmp_path):
    """What a shard's judges found of its runs (fae/judge/facts.py) comes with them, so a rejudge of the merged
    log decides from them as it would on the shard."""
    a = _shard(tmp_path / "a.duckdb", _run("r1"), _run("r2"))
    found = [FactsRow(run, "ensure_record", "evidence=proxy", "src-x", '{"targets": []}') for run in ("r1", "r2")]
    with EventLog(a) as log:
        log.write_batch(Batch(facts=found))
    into = tmp_path / "all.duckdb"
    merge_logs([a], into)
    merge_logs([a], into)
    with EventLog(into, read_only=True) as log:
        _, rows = log.query("SELECT run_id, judge, inputs, code_version, facts FROM judge_facts ORDER BY run_id")
    assert [FactsRow(*row) for row in rows] == found


def test_two_different_runs_under_one_id_are_refused_and_nothing_of_that_shard_is_written(tmp_path):
    a = _shard(tmp_path / "a.duckdb", _run("r1"))
    b = _shard(tmp_path / "b.duckdb", _run("r2"), _run("r1", start=T0 + timedelta(hours=1)))
    into = tmp_path / "all.duckdb"
    merge_logs([a], into)
    with pytest.raises(StoreError, match="holds run 'r1', and the log holds a different run"):
        merge_logs([b], into)
    assert _counts(into)["runs"] == 1
    c = _shard(tmp_path / "c.duckdb", _run("r1", task="other"))
    with pytest.raises(StoreError, match="different run"):
        merge_logs([c], into)


def test_a_shard_left_by_a_killed_worker_brings_its_journal(tmp_path):
    """What the worker journaled but never moved into DuckDB is merged too."""
    a = _shard(tmp_path / "a.duckdb", _run("r1"))
    journal = Journal(a)
    journal.append(_run("r2", body=b"late"))
    journal.close()
    into = tmp_path / "all.duckdb"
    merged = merge_logs([a], into)
    assert merged[0].runs == 2
    with EventLog(into, read_only=True) as log:
        assert log.query("SELECT answer FROM run_summary WHERE run_id = 'r2'")[1] == [("late",)]


def test_cli_merge_and_its_mistakes(tmp_path):
    a = _shard(tmp_path / "a.duckdb", _run("r1"))
    into = tmp_path / "all.duckdb"
    done = runner.invoke(app, ["log", "merge", str(a), "--into", str(into)])
    assert done.exit_code == 0, done.output
    assert "1 runs (0 already there), 4 events" in done.output
    for args, message in (
        ([str(tmp_path / "none.duckdb")], "no shard at"),
        ([str(into)], "is the log being merged into"),
    ):
        failed = runner.invoke(app, ["log", "merge", *args, "--into", str(into)])
        assert failed.exit_code == 1 and message in failed.output and "Traceback" not in failed.output, failed.output
