"""``fae rejudge --parquet DIR``: the runs of an export judged again give the verdict rows the log itself gives,
and a damaged export is one clear error that leaves nothing looking complete."""

from __future__ import annotations

import json
import os
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from bench.grow_log import grow
from fae import api
from fae.cli import app
from fae.errors import StoreError
from fae.judge.export_rejudge import rejudge_export
from fae.judge.judging import judges_to_run
from fae.judge.rejudge import batch_started, rejudge
from fae.replay.export_source import unreadable
from fae.store.bodies import BODY_FILE_BYTES, write_body
from fae.store.export import export_parquet, log_id, query_parquet
from fae.store.export_verdicts import complete_batch, start_batch
from fae.store.log import Batch, EventLog
from fae.store.secrets import SecretValues
from tests.exports import stop_export_part_way

runner = CliRunner()
CLOCK = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
RULES = {"accept_corrections": False}
COLUMNS = "run_id, judge, rule_set, rule_set_hash, code_version, outcome, passed, evidence, judged_at"


@pytest.fixture(scope="module")
def grown(scenario_log, tmp_path_factory):
    """The scenario log (32 runs) grown by copies, each with its own bodies, to 48."""
    log = tmp_path_factory.mktemp("export-rejudge") / "grown.duckdb"
    shutil.copy(scenario_log, log)
    assert grow(str(log), 48) == 48
    return log


def _rows(found: list[tuple]) -> list[tuple]:
    return sorted(
        ((*row[:2], json.loads(row[2]), *row[3:7], json.loads(row[7]), row[8]) for row in found),
        key=lambda r: (r[0], r[1], r[3]),
    )


def _log_batch(log: Path, batch: str) -> list[tuple]:
    with EventLog(log, read_only=True) as opened:
        return _rows(opened.query(f"SELECT {COLUMNS} FROM verdicts WHERE batch = ?", [batch])[1])


def _export_batch(directory: Path, batch: str) -> list[tuple]:
    return _rows(query_parquet(directory, f"SELECT {COLUMNS} FROM verdicts WHERE batch = ?", [batch])[1])


def _status(directory: Path, batch: str) -> list[tuple]:
    return query_parquet(
        directory, "SELECT complete, planned_runs, judged_runs FROM batch_status WHERE batch = ?", [batch]
    )[1]


def _copy_and_export(log: Path, tmp_path: Path) -> tuple[Path, Path]:
    copy, directory = tmp_path / "copy.duckdb", tmp_path / "export"
    shutil.copy(log, copy)
    export_parquet(copy, directory)
    return copy, directory


def test_an_export_rejudged_on_one_and_two_workers_gives_the_verdicts_of_its_log(grown, tmp_path):
    log, directory = _copy_and_export(grown, tmp_path)
    expected = rejudge(log, overrides=RULES, workers=1, clock=lambda: CLOCK, full=True)
    one = rejudge_export(directory, overrides=RULES, workers=1, clock=lambda: CLOCK)
    two = rejudge_export(directory, overrides=RULES, workers=2, clock=lambda: CLOCK, chunk=3)
    assert len(two.shards) == 2 and all(shard.runs for shard in two.shards)
    rows = _log_batch(log, expected.batch)
    assert len(rows) == expected.verdicts > 0
    assert _export_batch(directory, one.batch) == rows == _export_batch(directory, two.batch)
    assert one.outcomes == two.outcomes == expected.outcomes
    assert {r[5] for r in rows if r[1] == "ensure_record"} >= {"created_verified", "needs_review"}
    assert _status(directory, one.batch) == _status(directory, two.batch) == [(True, 48, 48)]
    # each verdict file sits in its runs' partition, named for its batch
    files = sorted((directory / "verdicts").glob(f"**/{two.batch}_*.parquet"))
    assert files and {f.parent.relative_to(directory / "verdicts") for f in files} <= {
        p.parent.relative_to(directory / "runs") for p in (directory / "runs").glob("**/*.parquet")
    }


def test_cli_rejudge_of_an_export_writes_into_it_and_sql_reads_it(grown, tmp_path):
    _, directory = _copy_and_export(grown, tmp_path)
    done = runner.invoke(
        app,
        [
            "rejudge",
            "--parquet",
            str(directory),
            "--runs",
            "*.c1",
            "--workers",
            "1",
            "--rule",
            "accept_corrections=false",
            "--log",
            str(tmp_path / "absent.duckdb"),
        ],
    )
    assert done.exit_code == 0, done.output
    assert str(directory) in done.output and not (tmp_path / "absent.duckdb").exists()
    shown = runner.invoke(
        app,
        [
            "sql",
            "--json",
            "--parquet",
            str(directory),
            "SELECT run_id, complete FROM verdicts JOIN batch_status USING (batch) WHERE batch LIKE 'rejudge-%'",
        ],
    )
    found = [json.loads(line) for line in shown.output.splitlines() if line.strip()]
    assert found and all(row["run_id"].endswith(".c1") and row["complete"] for row in found), shown.output


def _pad_a_seed(log: Path) -> str:
    """Make the seed bundle of the log's runs a large body kept in a side file; returns its hash."""
    with EventLog(log) as opened:
        _, rows = opened.query("SELECT DISTINCT payload->>'$.seed_blob' FROM events WHERE kind = 'SandboxSeeded'")
        seed = rows[0][0]
        big = opened.blob(seed) + b" " * BODY_FILE_BYTES  # trailing blanks: the same bundle to a JSON reader
        digest, size = write_body(opened.path, big, SecretValues())
        opened.write_batch(Batch(external={digest: size}))
        opened.con.execute(
            "UPDATE events SET payload = replace(CAST(payload AS VARCHAR), ?, ?) WHERE kind = 'SandboxSeeded'",
            [seed, digest],
        )
    return digest


def test_a_large_body_is_read_from_the_exports_bodies_folder(grown, tmp_path):
    log = tmp_path / "padded.duckdb"
    shutil.copy(grown, log)
    digest = _pad_a_seed(log)
    directory = tmp_path / "export"
    export_parquet(log, directory)
    side_file = directory / "bodies" / digest[:2] / f"{digest[2:]}.zst"
    assert side_file.is_file()
    expected = rejudge(log, overrides=RULES, workers=1, clock=lambda: CLOCK, full=True)
    got = rejudge_export(directory, overrides=RULES, workers=1, clock=lambda: CLOCK)
    assert _export_batch(directory, got.batch) == _log_batch(log, expected.batch)
    side_file.unlink()  # a partial copy of the export: the large body is gone
    with pytest.raises(StoreError, match=f"body {digest} of the export .* is missing"):
        rejudge_export(directory, overrides=RULES, workers=1)
    ((batch, complete),) = query_parquet(
        directory, "SELECT batch, complete FROM batch_status WHERE batch LIKE 'rejudge-%' AND batch != ?", [got.batch]
    )[1]
    assert complete is False and not _export_batch(directory, batch)  # started, never complete, no verdict


def test_a_run_whose_events_lie_in_two_partitions_is_judged_whole(grown, tmp_path):
    log, directory = _copy_and_export(grown, tmp_path)
    name = log_id(log)
    con = duckdb.connect()
    source = next((directory / "events").glob(f"**/{name}_*.parquet"))
    run_id, seqs = con.execute(
        f"SELECT run_id, max(seq) FROM read_parquet('{source}') GROUP BY run_id ORDER BY run_id LIMIT 1"
    ).fetchone()
    later = source.parent.parent / "day=2099-01-01"
    later.mkdir(parents=True)
    # the run's second half moves to a file of another day (as a tool partitioning by event day would write it)
    con.execute(
        f"COPY (SELECT * FROM read_parquet('{source}') WHERE run_id = '{run_id}' AND seq > {seqs // 2})"
        f" TO '{later / (name + '_7.parquet')}' (FORMAT parquet)"
    )
    kept = source.with_name("kept.tmp")
    con.execute(
        f"COPY (SELECT * FROM read_parquet('{source}') WHERE NOT (run_id = '{run_id}' AND seq > {seqs // 2})"
        f" ORDER BY file_row_number) TO '{kept}' (FORMAT parquet)"
    )
    kept.replace(source)
    expected = rejudge(log, overrides=RULES, workers=1, clock=lambda: CLOCK, full=True)
    got = rejudge_export(directory, overrides=RULES, workers=2, clock=lambda: CLOCK)
    assert _export_batch(directory, got.batch) == _log_batch(log, expected.batch)


def test_an_export_missing_its_blobs_file_is_one_clear_line_and_writes_nothing(grown, tmp_path):
    log, directory = _copy_and_export(grown, tmp_path)
    (directory / "blobs" / f"{log_id(log)}.parquet").unlink()
    batches = sorted((directory / "verdict_batches").iterdir())
    done = runner.invoke(app, ["rejudge", "--parquet", str(directory), "--workers", "1"])
    assert done.exit_code == 1 and "Traceback" not in done.output
    assert f"has no blobs/{log_id(log)}.parquet" in done.output and len(done.output.strip().splitlines()) == 1
    assert sorted((directory / "verdict_batches").iterdir()) == batches


def test_a_run_exported_from_two_logs_is_refused(grown, tmp_path):
    log, directory = _copy_and_export(grown, tmp_path)
    twin = tmp_path / "twin.duckdb"
    shutil.copy(log, twin)
    export_parquet(twin, directory)  # the same runs again, under another log's name
    with pytest.raises(StoreError, match="more than once"):
        rejudge_export(directory, workers=1)


def test_a_damaged_events_file_is_one_clear_line(grown, tmp_path):
    _, directory = _copy_and_export(grown, tmp_path)
    victim = next((directory / "events").glob("**/*.parquet"))
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])  # cut short, as a failed copy leaves it
    done = runner.invoke(app, ["rejudge", "--parquet", str(directory), "--workers", "1"])
    assert done.exit_code == 1 and "Traceback" not in done.output and "cannot read the export" in done.output
    assert len(done.output.strip().splitlines()) == 1, done.output


def test_the_api_names_what_to_rejudge():
    with pytest.raises(StoreError, match="name a log or a Parquet export"):
        api.rejudge()


def _comparison(result) -> list[tuple]:
    return [(j.judge, sorted(j.transitions.items()), sorted(j.flipped), j.harms) for j in result.judges]


def test_compare_on_an_export_matches_compare_on_its_log(grown, tmp_path):
    log, directory = _copy_and_export(grown, tmp_path)
    on_log = api.compare(log, "accept_corrections=false", "", judge_name="ensure_record", workers=1)
    one = api.compare(None, "accept_corrections=false", "", judge_name="ensure_record", workers=1, parquet=directory)
    two = api.compare(None, "accept_corrections=false", "", judge_name="ensure_record", workers=2, parquet=directory)
    assert on_log.computed == one.computed == two.computed > 0  # the missing verdicts were judged from the export
    assert _comparison(one) == _comparison(two) == _comparison(on_log)
    assert any(j.flipped for j in on_log.judges)
    # once a rejudge put the new rule set's verdicts into the export, compare reads them instead
    rejudge_export(directory, judge_name="ensure_record", overrides=RULES, workers=1)
    after = api.compare(None, "accept_corrections=false", "", judge_name="ensure_record", workers=1, parquet=directory)
    assert after.computed < one.computed and _comparison(after) == _comparison(one)


def test_a_rejudge_stopped_while_its_files_move_in_leaves_its_batch_incomplete(grown, tmp_path, monkeypatch):
    _, directory = _copy_and_export(grown, tmp_path)
    moved = os.replace

    def fail_for_verdicts(source, target):
        # a kill cannot be timed to fall between two renames; the first verdict file's rename fails instead
        if ".incoming-rejudge-" in str(source) and "verdict_batches" not in str(target):
            raise OSError("no space left on device")
        moved(source, target)

    monkeypatch.setattr("fae.store.export_verdicts.os.replace", fail_for_verdicts)
    with pytest.raises(StoreError, match="cannot move the verdicts"):
        rejudge_export(directory, workers=1)
    monkeypatch.undo()
    _, rows = query_parquet(directory, "SELECT complete, verdicts FROM batch_status WHERE batch LIKE 'rejudge-%'")
    assert rows == [(False, 0)]


def test_an_export_stopped_part_way_is_not_judged_until_exported_again(grown, tmp_path):
    log, directory = _copy_and_export(grown, tmp_path)
    obstacle = stop_export_part_way(log, directory)
    batches = sorted((directory / "verdict_batches").iterdir())
    refused = f"the export of log {log.resolve()} into {directory} did not finish"
    done = runner.invoke(app, ["rejudge", "--parquet", str(directory), "--workers", "1"])
    assert done.exit_code == 1 and "Traceback" not in done.output
    assert refused in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.output
    assert sorted((directory / "verdict_batches").iterdir()) == batches  # no batch started
    with pytest.raises(StoreError, match=re.escape(refused)):
        api.compare(None, "accept_corrections=false", "", judge_name="ensure_record", workers=1, parquet=directory)
    obstacle.unlink()
    export_parquet(log, directory)
    expected = rejudge(log, overrides=RULES, workers=1, clock=lambda: CLOCK, full=True)
    got = rejudge_export(directory, overrides=RULES, workers=2, clock=lambda: CLOCK)
    assert got.runs == expected.runs == 48
    assert _export_batch(directory, got.batch) == _log_batch(log, expected.batch)


def test_a_batch_is_not_completed_over_an_export_stopped_since_it_began(grown, tmp_path):
    log, directory = _copy_and_export(grown, tmp_path)
    started = batch_started(judges_to_run(), CLOCK, 48)
    start_batch(directory, started)
    stop_export_part_way(log, directory)  # the log is exported again while the batch is judged, and that stops
    with pytest.raises(StoreError, match="did not finish"):
        complete_batch(directory, started, [], CLOCK, 48)
    ((completed,),) = (
        duckdb.connect()
        .execute(f"SELECT completed_at FROM read_parquet('{directory / 'verdict_batches' / started.batch}.parquet')")
        .fetchall()
    )
    assert completed is None


def test_an_export_error_without_a_message_is_still_one_line(tmp_path):
    # DuckDB errors carry a message; one that does not must still give a line, not an IndexError
    blank = unreadable(tmp_path, duckdb.IOException(""))
    assert str(blank) == f"cannot read the export {tmp_path}: IOException"
    several = unreadable(tmp_path, duckdb.IOException("No files found\nLINE 1: SELECT ..."))
    assert str(several) == f"cannot read the export {tmp_path}: No files found"


@pytest.mark.parametrize("column", ["variation", "repeat"])
def test_an_export_with_a_run_missing_its_variation_is_one_clear_line_and_writes_nothing(grown, tmp_path, column):
    log, directory = _copy_and_export(grown, tmp_path)
    con = duckdb.connect()
    for part in (directory / "runs").rglob("*.parquet"):  # an export is files anyone can write
        names = [row[0] for row in con.execute(f"DESCRIBE SELECT * FROM read_parquet('{part}')").fetchall()]
        chosen = ", ".join(f'NULL AS "{name}"' if name == column else f'"{name}"' for name in names)
        con.execute(f"COPY (SELECT {chosen} FROM read_parquet('{part}')) TO '{part}.new' (FORMAT parquet)")
        Path(f"{part}.new").replace(part)
    batches = sorted((directory / "verdict_batches").iterdir())
    done = runner.invoke(app, ["rejudge", "--parquet", str(directory), "--workers", "1"])
    assert done.exit_code == 1 and "Traceback" not in done.output, done.output
    assert "has no whole-number variation or repeat" in done.output and len(done.output.strip().splitlines()) == 1
    assert sorted((directory / "verdict_batches").iterdir()) == batches
