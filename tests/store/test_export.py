"""fae export --parquet writes Hive-partitioned folders that many logs share; fae sql --parquet queries them with the
log's views and gets what the logs give."""

from __future__ import annotations

import json
import re
import sys
from datetime import timedelta
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from fae.cli import app
from fae.errors import StoreError
from fae.store.export import drop_export, export_parquet, log_id, open_parquet, query_parquet

sys.path.insert(0, str(Path(__file__).parent))

from logs import T0, finished_run, write_log

from tests.exports import stop_export_part_way

runner = CliRunner()
SUMMARY = "SELECT run_id, task_id, events, answer FROM run_summary ORDER BY run_id"


@pytest.fixture
def two_logs(tmp_path):
    a = write_log(
        tmp_path / "a.duckdb",
        finished_run("a1", suite="s1", body=b"one"),
        finished_run("a2", suite="s1", start=T0 + timedelta(days=1), body=b"two"),
    )
    b = write_log(tmp_path / "b.duckdb", finished_run("b1", suite="s2", body=b"three"))
    return a, b


def _json_rows(output: str) -> list[dict]:
    return [json.loads(line) for line in output.splitlines() if line.strip()]


def test_two_logs_export_into_one_directory_partitioned_by_suite_and_day(two_logs, tmp_path):
    a, b = two_logs
    out = tmp_path / "exports"
    export_parquet(a, out)
    export_parquet(b, out)
    days = sorted(p.relative_to(out / "events").as_posix() for p in (out / "events").glob("*/*/*"))
    assert days == [
        "part_suite=s1/part_experiment=-/day=2026-01-01",
        "part_suite=s1/part_experiment=-/day=2026-01-02",
        "part_suite=s2/part_experiment=-/day=2026-01-01",
    ]
    _, rows = query_parquet(out, SUMMARY)
    assert rows == [("a1", "t", 4, "one"), ("a2", "t", 4, "two"), ("b1", "t", 4, "three")]
    # plain DuckDB reads the folders without fae
    (count,) = (
        duckdb.connect()
        .execute(
            f"SELECT count(*) FROM read_parquet('{out.as_posix()}/events/**/*.parquet', hive_partitioning = true)"
            " WHERE part_suite = 's1'"
        )
        .fetchone()
    )
    assert count == 8


def test_exporting_a_log_again_replaces_its_own_files_only(two_logs, tmp_path):
    a, b = two_logs
    out = tmp_path / "exports"
    for log in (a, b, a, a):
        export_parquet(log, out)
    assert query_parquet(out, "SELECT count(*), count(DISTINCT run_id) FROM runs")[1] == [(3, 3)]
    assert query_parquet(out, "SELECT count(*) FROM events")[1] == [(12,)]


def test_cli_sql_on_an_export_matches_sql_on_the_log(two_logs, tmp_path):
    a, _ = two_logs
    out = tmp_path / "exports"
    done = runner.invoke(app, ["export", "--parquet", str(out), "--log", str(a)])
    assert done.exit_code == 0, done.output
    on_log = runner.invoke(app, ["sql", "--json", "--log", str(a), SUMMARY])
    on_export = runner.invoke(app, ["sql", "--json", "--parquet", str(out), SUMMARY])
    assert on_log.exit_code == on_export.exit_code == 0, on_export.output
    assert _json_rows(on_export.output) == _json_rows(on_log.output) and len(_json_rows(on_log.output)) == 2


def test_a_directory_that_is_no_export_is_one_clear_error(tmp_path):
    with pytest.raises(StoreError, match="holds no fae export"):
        query_parquet(tmp_path, "SELECT 1")
    done = runner.invoke(app, ["sql", "--parquet", str(tmp_path), "SELECT 1"])
    assert done.exit_code == 1 and "holds no fae export" in done.output and "Traceback" not in done.output


@pytest.fixture
def stopped(two_logs, tmp_path):
    """Both logs exported into one directory, then a's export again, failing at its events: (a, b, dir, obstacle)."""
    a, b = two_logs
    out = tmp_path / "exports"
    export_parquet(b, out)
    export_parquet(a, out)
    return a, b, out, stop_export_part_way(a, out)


def test_an_export_stopped_part_way_is_refused_by_every_reader(stopped):
    a, _, out, _ = stopped
    marker = out / f"{log_id(a)}.unfinished"
    line = json.loads(marker.read_text().splitlines()[0])
    assert line["log"] == str(a.resolve()) and line["began"]
    # what is left: a's runs rewritten, its events gone; read without fae, nothing looks wrong
    ((runs, events),) = (
        duckdb.connect()
        .execute(
            f"SELECT (SELECT count(*) FROM read_parquet('{out.as_posix()}/runs/**/*.parquet')),"
            f" (SELECT count(*) FROM read_parquet('{out.as_posix()}/events/**/*.parquet'))"
        )
        .fetchall()
    )
    assert (runs, events) == (3, 4)
    refused = f"the export of log {a.resolve()} into {out} did not finish"
    with pytest.raises(StoreError, match=re.escape(refused)):
        open_parquet(out)
    with pytest.raises(StoreError, match=re.escape(refused)):
        query_parquet(out, SUMMARY)
    done = runner.invoke(app, ["sql", "--parquet", str(out), SUMMARY])
    assert done.exit_code == 1 and "Traceback" not in done.output
    assert refused in done.stderr and f"fae export --parquet {out} --log {a.resolve()}" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not done.stdout


def test_a_marker_cut_short_still_names_its_log(two_logs, tmp_path):
    a, _ = two_logs
    out = tmp_path / "exports"
    export_parquet(a, out)
    (out / f"{log_id(a)}.unfinished").write_text("")  # an export killed while it wrote its marker
    with pytest.raises(StoreError, match=re.escape(f"the export of log {log_id(a)} into {out} did not finish")):
        query_parquet(out, SUMMARY)


def test_exporting_the_log_again_repairs_the_directory(stopped):
    a, _, out, obstacle = stopped
    obstacle.unlink()
    export_parquet(a, out)
    assert not list(out.glob("*.unfinished"))
    _, rows = query_parquet(out, SUMMARY)
    assert rows == [("a1", "t", 4, "one"), ("a2", "t", 4, "two"), ("b1", "t", 4, "three")]
    assert query_parquet(out, "SELECT count(*) FROM verdicts")[1] == [(3,)]


def test_another_logs_export_does_not_clear_the_marker(stopped):
    a, b, out, _ = stopped
    export_parquet(b, out)
    assert [p.name for p in out.glob("*.unfinished")] == [f"{log_id(a)}.unfinished"]
    with pytest.raises(StoreError, match=re.escape(f"the export of log {a.resolve()} into {out} did not finish")):
        query_parquet(out, SUMMARY)


def test_an_export_without_a_marker_is_read_as_before(two_logs, tmp_path):
    a, b = two_logs
    out = tmp_path / "exports"
    export_parquet(a, out)
    export_parquet(b, out)
    # a finished export leaves the directory as exports before the marker wrote it: the table folders only
    assert sorted(p.name for p in out.iterdir()) == [
        "blobs",
        "events",
        "judge_facts",
        "runs",
        "task_meta",
        "verdict_batches",
        "verdicts",
    ]
    assert query_parquet(out, "SELECT count(*) FROM run_summary")[1] == [(3,)]


def _files_of(out: Path, name: str) -> list[str]:
    return sorted(
        p.relative_to(out).as_posix()
        for p in out.rglob("*.parquet")
        if p.name == f"{name}.parquet" or re.fullmatch(re.escape(name) + r"_\d+\.parquet", p.name)
    )


def test_an_unfinished_export_whose_log_has_moved_is_repaired_by_dropping_its_files(stopped, tmp_path):
    """Exporting from the log's new path names its files anew, so it cannot clear the old marker; --drop can."""
    a, _, out, obstacle = stopped
    obstacle.unlink()  # the full disk is fixed
    old = log_id(a)
    (tmp_path / "moved").mkdir()
    moved = a.rename(tmp_path / "moved" / "a.duckdb")
    export_parquet(moved, out)
    assert log_id(moved) != old and _files_of(out, old)
    refused = runner.invoke(app, ["sql", "--parquet", str(out), SUMMARY])
    assert refused.exit_code == 1 and f"fae export --parquet {out} --drop {old}" in refused.stderr, refused.stderr

    count = len(_files_of(out, old))
    done = runner.invoke(app, ["export", "--parquet", str(out), "--drop", old])
    assert done.exit_code == 0, done.output
    assert f"removed {count} files of {old} from {out}" in " ".join(done.output.split())
    assert _files_of(out, old) == [] and not list(out.glob("*.unfinished"))
    _, rows = query_parquet(out, SUMMARY)  # the moved log's export and b's, each once
    assert rows == [("a1", "t", 4, "one"), ("a2", "t", 4, "two"), ("b1", "t", 4, "three")]


def test_dropping_one_log_leaves_the_others_even_one_whose_name_begins_with_it(two_logs, tmp_path):
    a, _ = two_logs
    out = tmp_path / "exports"
    # a log whose files are named "<a's name>_b-<digest>_0.parquet": they begin as a's own files do
    twin = write_log(tmp_path / f"{log_id(a)}_b.duckdb", finished_run("t1", suite="s1", body=b"twin"))
    export_parquet(twin, out)
    export_parquet(a, out)
    export_parquet(a, out)  # an export again replaces a's files, and only those
    kept, own = _files_of(out, log_id(twin)), _files_of(out, log_id(a))
    assert kept and own and not set(kept) & set(own)
    assert drop_export(out, log_id(a)) == len(own)
    assert _files_of(out, log_id(a)) == [] and _files_of(out, log_id(twin)) == kept
    assert query_parquet(out, SUMMARY)[1] == [("t1", "t", 4, "twin")]


@pytest.mark.parametrize("name", ["", "..", "../exports", "a/b", "no-such-log-0123456789"])
def test_a_drop_of_what_names_no_log_is_one_error_and_removes_nothing(two_logs, tmp_path, name):
    a, _ = two_logs
    out = tmp_path / "exports"
    export_parquet(a, out)
    before = sorted(out.rglob("*"))
    done = runner.invoke(app, ["export", "--parquet", str(out), "--drop", name])
    assert done.exit_code == 1 and "Traceback" not in done.output
    assert done.stderr.startswith("error:") and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert sorted(out.rglob("*")) == before


def test_a_drop_stopped_part_way_is_refused_until_it_is_dropped_again(two_logs, tmp_path, monkeypatch):
    """A file that cannot be removed half way (a mock: as root in a temp folder no real unlink fails) leaves the
    log's marker, so no reader takes the half-removed log for whole."""
    a, b = two_logs
    out = tmp_path / "exports"
    export_parquet(a, out)
    export_parquet(b, out)
    real = Path.unlink
    calls = []

    def failing(path, *args, **kwargs):
        calls.append(path)
        if len(calls) == 2:
            raise OSError(5, "Input/output error")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(Path, "unlink", failing)
    with pytest.raises(StoreError, match="cannot remove the files of"):
        drop_export(out, log_id(a))
    monkeypatch.undo()
    left = _files_of(out, log_id(a))
    assert [p.name for p in out.glob("*.unfinished")] == [f"{log_id(a)}.unfinished"] and left
    with pytest.raises(StoreError, match=re.escape(f"--drop {log_id(a)}")):
        query_parquet(out, SUMMARY)
    assert drop_export(out, log_id(a)) == len(left)
    assert query_parquet(out, SUMMARY)[1] == [("b1", "t", 4, "three")]


def test_polars_reads_the_export_folders_as_duckdb_does(two_logs, tmp_path):
    """docs/scale.md tells users of other tools how to read a directory; Polars is checked here (Spark needs a JVM)."""
    import polars as pl  # a dev dependency for this test alone

    a, b = two_logs
    out = tmp_path / "exports"
    export_parquet(a, out)
    export_parquet(b, out)
    events = pl.scan_parquet(f"{out.as_posix()}/events/**/*.parquet", hive_partitioning=True)
    assert events.filter(pl.col("part_suite") == "s1").select(pl.len()).collect().item() == 8
    runs = pl.scan_parquet(f"{out.as_posix()}/runs/**/*.parquet", hive_partitioning=True).collect()
    assert sorted(runs["run_id"].to_list()) == ["a1", "a2", "b1"]
    assert sorted(str(day) for day in runs["day"].to_list()) == ["2026-01-01", "2026-01-01", "2026-01-02"]
    by_fae = dict(query_parquet(out, "SELECT run_id, count(*) FROM events GROUP BY run_id")[1])
    by_polars = dict(
        pl.scan_parquet(f"{out.as_posix()}/events/**/*.parquet", hive_partitioning=True)
        .group_by("run_id")
        .len()
        .collect()
        .iter_rows()
    )
    assert by_polars == by_fae
