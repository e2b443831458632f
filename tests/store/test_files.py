"""Files holding bodies are owner-only, created fresh, never written through a planted link."""

from __future__ import annotations

import os
import stat

import anyio
import duckdb
import pytest
from typer.testing import CliRunner

from fae.cli import app
from fae.errors import StoreError
from fae.store import events as ev
from fae.store import journal as journal_module
from fae.store import schema
from fae.store.bodies import BODY_FILE_BYTES, bodies_dir, body_path
from fae.store.export import export_parquet
from fae.store.journal import segments
from fae.store.live import LiveQueryServer, live_file
from fae.store.log import EventLog, RunRow, blob_hash
from fae.store.writer import LogWriter, Stamped, open_writer

runner = CliRunner()


@pytest.fixture(autouse=True)
def group_readable_umask():
    """Start each test with the usual umask (022), which would make new files 0644."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def _mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def _bait(tmp_path):
    """A file an attacker wants overwritten or read through a link, mode 0644."""
    target = tmp_path / "victim.txt"
    target.write_text("precious")
    target.chmod(0o644)
    return target


def _submit_one(writer: LogWriter) -> None:
    writer.submit(
        runs=[RunRow(run_id="r", task_id="t", variation=0, agent="a", repeat=0)],
        events=[Stamped("r", ev.AnswerGiven(text="secret body"))],
    )


@pytest.mark.anyio
async def test_the_log_its_wal_and_journal_segments_are_owner_only(tmp_path):
    path = tmp_path / "log.duckdb"
    with EventLog(path) as log:
        async with open_writer(log) as writer:
            _submit_one(writer)
            (segment,) = segments(path)
            assert _mode(segment) == 0o600
            await writer.flush()
        wal = path.with_name(path.name + ".wal")
        assert wal.exists(), "expected an uncheckpointed WAL while the log is open"
        assert _mode(wal) == 0o600
    assert _mode(path) == 0o600


def test_a_pre_existing_0644_log_is_narrowed_on_open(tmp_path):
    path = tmp_path / "log.duckdb"
    EventLog(path).close()
    path.chmod(0o644)
    with EventLog(path):
        assert _mode(path) == 0o600


@pytest.mark.parametrize("planted", ["log.duckdb", "log.duckdb.wal"])
def test_a_planted_link_at_the_log_or_its_wal_is_refused(tmp_path, planted):
    target = _bait(tmp_path)
    (tmp_path / planted).symlink_to(target)
    with pytest.raises(StoreError, match="symbolic link"):
        EventLog(tmp_path / "log.duckdb")
    assert target.read_text() == "precious" and _mode(target) == 0o644


def test_a_planted_link_among_journal_segments_is_never_read(tmp_path):
    path = tmp_path / "log.duckdb"
    EventLog(path).close()
    elsewhere = tmp_path / "crafted"
    journal = journal_module.Journal(elsewhere)
    journal.append(journal_module.Batch(runs=[RunRow(run_id="forged", task_id="t", variation=0, agent="a", repeat=0)]))
    (crafted,) = [journal.seal()]
    (tmp_path / (path.name + ".journal-00000000000000000001-planted")).symlink_to(crafted)
    with EventLog(path) as log:
        assert log.query("SELECT run_id FROM runs")[1] == []
    assert crafted.exists()


@pytest.mark.parametrize("stale", ["file", "link"])
def test_the_live_file_is_created_fresh_0600_over_a_stale_file_or_link(tmp_path, stale):
    path = tmp_path / "log.duckdb"
    live = live_file(path)
    target = _bait(tmp_path)
    if stale == "file":
        live.write_text('{"port": 1, "token": "old"}')
        live.chmod(0o644)
    else:
        live.symlink_to(target)
    with EventLog(path) as log, LiveQueryServer(log) as server:
        assert not live.is_symlink() and _mode(live) == 0o600
        assert server.token in live.read_text()
    assert target.read_text() == "precious" and _mode(target) == 0o644


def test_parquet_exports_are_owner_only_even_over_old_files_and_links(tmp_path):
    from datetime import UTC, datetime

    from fae.store.export import log_id
    from fae.store.log import Batch, EventRow, RunRow

    path = tmp_path / "log.duckdb"
    with EventLog(path) as log:
        started = datetime(2026, 1, 1, tzinfo=UTC)
        log.write_batch(
            Batch(
                runs=[RunRow("r1", "t", 0, "gold", 0, started_at=started)],
                events=[EventRow("r1", 1, "RunStarted", started, 0, "harness", None, b'{"type":"RunStarted"}')],
            )
        )
    out = tmp_path / "export"
    name = log_id(path)
    target = _bait(tmp_path)
    (out / "blobs").mkdir(parents=True)
    (out / "blobs" / f"{name}.parquet").symlink_to(target)  # a link where this log's export goes
    stale = out / "runs" / "part_suite=-" / "part_experiment=-" / "day=2026-01-01" / f"{name}_0.parquet"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"old")
    stale.chmod(0o644)  # an old file of this log, readable by all
    assert export_parquet(path, out)
    files = sorted(out.rglob("*.parquet"))
    assert files and any(f.parent.name == "day=2026-01-01" for f in files), files
    for file in files:
        assert not file.is_symlink() and _mode(file) == 0o600, file
    assert target.read_text() == "precious" and _mode(target) == 0o644


def test_a_foreign_duckdb_file_is_refused_in_one_line_and_left_alone(tmp_path):
    foreign = tmp_path / "shop.duckdb"
    con = duckdb.connect(str(foreign))
    con.execute("CREATE TABLE customers (id INTEGER)")
    con.close()
    with pytest.raises(StoreError, match="other tables and no fae schema"):
        EventLog(foreign)
    result = runner.invoke(app, ["record", "--log", str(foreign), "--task", "builtin-create-patient"])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and "no fae schema" in result.output, result.output
    con = duckdb.connect(str(foreign), read_only=True)
    tables = {t for (t,) in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    con.close()
    assert tables == {"customers"}


def test_an_old_log_read_only_points_at_fae_migrate(tmp_path):
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE schema_version (version INTEGER, applied_at TIMESTAMPTZ)")
    con.execute(schema.MIGRATIONS[0])
    con.execute("INSERT INTO schema_version VALUES (1, now())")
    con.close()
    listed = runner.invoke(app, ["runs", "--log", str(path)])
    assert listed.exit_code == 1 and "fae migrate" in listed.output, listed.output
    assert "open it once for writing" not in listed.output
    migrated = runner.invoke(app, ["migrate", "--log", str(path)])
    assert migrated.exit_code == 0 and f"schema version {schema.LATEST_VERSION}" in migrated.output, migrated.output
    assert runner.invoke(app, ["runs", "--log", str(path)]).exit_code == 0


@pytest.mark.anyio
async def test_fsync_flushes_every_journal_append_to_disk(tmp_path, monkeypatch):
    # A spy, not a fake: power loss cannot be staged in a test, so count the fsyncs the journal asks for.
    synced: list[int] = []
    real_fsync = os.fsync

    def spy(fd):
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(journal_module.os, "fsync", spy)
    for fsync, expected_at_least in ((False, 0), (True, 3)):
        synced.clear()
        with EventLog(tmp_path / f"log-{fsync}.duckdb") as log:
            async with open_writer(log, fsync=fsync) as writer:
                for index in range(3):
                    writer.submit(events=[Stamped("r", ev.AnswerGiven(text=str(index)))])
                    await anyio.sleep(0)
        if fsync:
            assert len(synced) >= expected_at_least, synced
        else:
            assert synced == []


@pytest.mark.anyio
async def test_large_bodies_side_files_and_their_folders_are_owner_only_and_never_reached_through_a_link(tmp_path):
    path = tmp_path / "log.duckdb"
    body = os.urandom(BODY_FILE_BYTES)
    with EventLog(path) as log:
        async with open_writer(log) as writer:
            writer.submit(blobs={blob_hash(body): body})
            await writer.flush()
        stored = body_path(path, blob_hash(body))
        assert log.blob(blob_hash(body)) == body
    assert _mode(stored) == 0o600
    assert _mode(stored.parent) == _mode(bodies_dir(path)) == 0o700
    assert [p.name for p in bodies_dir(path).iterdir()] == [stored.parent.name]  # no temporary file left behind

    planted = tmp_path / "planted.duckdb"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    bodies_dir(planted).symlink_to(elsewhere)
    with EventLog(planted) as log:
        async with open_writer(log) as writer:
            with pytest.raises(StoreError, match="symbolic link"):
                writer.submit(blobs={blob_hash(body): body})
            assert not writer.healthy
    assert not any(elsewhere.iterdir())
