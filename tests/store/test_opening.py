"""Every connection fae makes to a log is locked down before its first query, whatever opened it and why.

The hostile corpus (test_hostile_logs.py) shows the commands; here each way of opening a log is checked
directly: no file outside what the caller granted can be read or written, no setting can be changed, and what
was granted (the export folder, the spool, a shard to attach, a worker's settings) still works.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import duckdb
import pytest

import fae
from fae.errors import StoreError
from fae.store.live import LogReader
from fae.store.log import EventLog
from fae.store.opening import connect_log

sys.path.insert(0, str(Path(__file__).parent))

from logs import finished_run, write_log

LOCKED = (
    "SELECT current_setting('enable_external_access'), current_setting('autoinstall_known_extensions'),"
    " current_setting('autoload_known_extensions'), current_setting('lock_configuration')"
)
OPENERS = {
    "read-only": lambda log, folder: EventLog(log, read_only=True),
    "for writing": lambda log, folder: EventLog(log),
    "export's (a folder granted)": lambda log, folder: EventLog(log, read_only=True, folders=[folder]),
    "merge's (a shard granted)": lambda log, folder: EventLog(log, files=[folder / "shard.duckdb"]),
    "a judging worker's (settings)": lambda log, folder: EventLog(log, read_only=True, settings={"threads": 1}),
    "the reader of fae sql, runs, show": lambda log, folder: LogReader(log)._log,
    "fae.open_log": lambda log, folder: fae.open_log(log),
}


@pytest.fixture
def log(tmp_path):
    path = write_log(tmp_path / "log.duckdb", finished_run("r1"))
    (tmp_path / "secret.txt").write_text("not for a log to read")
    (tmp_path / "granted").mkdir()
    return path


@pytest.mark.parametrize("opener", sorted(OPENERS))
def test_every_way_of_opening_a_log_is_locked_down(log, opener, tmp_path):
    opened = OPENERS[opener](log, tmp_path / "granted")
    try:
        for con in (opened.con, opened.cursor()):
            assert con.execute(LOCKED).fetchall() == [(False, False, False, True)]
            with pytest.raises(duckdb.PermissionException):
                con.execute(f"SELECT content FROM read_text('{tmp_path / 'secret.txt'}')").fetchall()
            with pytest.raises(duckdb.PermissionException):
                con.execute(f"COPY (SELECT 1) TO '{tmp_path / 'written.csv'}'")
            with pytest.raises(duckdb.Error, match="locked"):
                con.execute("SET enable_external_access = true")
    finally:
        opened.close()
    assert not (tmp_path / "written.csv").exists()


def test_a_granted_folder_is_writable_and_nothing_beside_it(log, tmp_path):
    granted = tmp_path / "granted"
    with EventLog(log, read_only=True, folders=[granted]) as opened:
        opened.con.execute(f"COPY (SELECT run_id FROM runs) TO '{granted / 'runs.parquet'}' (FORMAT parquet)")
        for outside in (tmp_path / "beside.parquet", granted / ".." / "up.parquet", tmp_path / "granted2" / "x"):
            with pytest.raises(duckdb.PermissionException):
                opened.con.execute(f"COPY (SELECT 1) TO '{outside}' (FORMAT parquet)")
    assert (granted / "runs.parquet").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["granted", "log.duckdb", "secret.txt"]


def test_a_granted_shard_can_be_attached_and_no_other_file(log, tmp_path):
    shard = write_log(tmp_path / "shard.duckdb", finished_run("r2"))
    other = write_log(tmp_path / "other.duckdb", finished_run("r3"))
    with EventLog(log, files=[shard, shard.with_name("shard.duckdb.wal")]) as opened:
        opened.con.execute(f"ATTACH '{shard}' AS shard (READ_ONLY)")
        assert opened.con.execute("SELECT run_id FROM shard.runs").fetchall() == [("r2",)]
        opened.con.execute("DETACH shard")
        with pytest.raises(duckdb.PermissionException):
            opened.con.execute(f"ATTACH '{other}' AS other (READ_ONLY)")


def test_a_worker_s_settings_are_set_before_the_lock(log):
    with EventLog(log, read_only=True, settings={"threads": 1, "memory_limit": "128MB"}) as opened:
        threads, memory = opened.con.execute(
            "SELECT current_setting('threads'), current_setting('memory_limit')"
        ).fetchall()[0]
    assert threads == 1 and memory in ("122.0 MiB", "128.0 MiB")


def test_a_failed_open_leaves_no_connection_behind(tmp_path):
    """A log refused after its connection was made closes it: the file can be opened again at once."""
    path = write_log(tmp_path / "log.duckdb", finished_run("r1"))
    con = duckdb.connect(str(path))
    con.execute("CREATE MACRO leak(x) AS x")
    con.close()
    with pytest.raises(StoreError, match="defines a macro"):
        EventLog(path)
    con = connect_log(path, read_only=False)  # a left-over connection would hold the file under another config
    con.execute("DROP MACRO leak")
    con.close()
    EventLog(path).close()


def _connects_to_a_file(call: ast.Call) -> bool:
    """A ``duckdb.connect(...)`` given anything but nothing or ``":memory:"``: a connection to a file."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr == "connect" and getattr(func.value, "id", "") == "duckdb"):
        return False
    first = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "database"), None)
    return first is not None and not (isinstance(first, ast.Constant) and first.value == ":memory:")


def test_only_the_opening_module_connects_to_a_file():
    """Every other connection fae makes is in memory (Parquet readers, spools, the SQL parser), so no log is ever
    opened past the lock-down and the catalogue check."""
    root = Path(fae.__file__).parent
    found = [
        str(path.relative_to(root))
        for path in sorted(root.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.Call) and _connects_to_a_file(node)
    ]
    assert found == ["store/opening.py"], found
