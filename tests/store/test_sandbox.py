"""`fae sql` and the live endpoint only read: every bypass we could think of is refused, offline and live."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from fae.cli.main import app
from fae.errors import StoreError
from fae.store import events as ev
from fae.store.live import LiveQueryServer, LogReader, live_file
from fae.store.log import Batch, EventLog, EventRow, RunRow
from fae.store.sandbox import Budget, check_query
from fae.store.writer import Stamped, open_writer

runner = CliRunner()

# statements that write, attach, load, configure or run something: refused before they reach a connection
REFUSED = [
    "DELETE FROM events",
    "/* a comment first */ DELETE FROM events",
    "-- a line comment\nDROP TABLE runs",
    "SELECT 1; DELETE FROM events",
    "SELECT ';'; DELETE FROM events",
    "SELECT 1;;DELETE FROM events",
    "WITH d AS (DELETE FROM events RETURNING 1) SELECT count(*) FROM d",
    "WITH d AS (INSERT INTO runs (run_id, task_id, variation, agent, repeat, status) "
    "VALUES ('x', 't', 0, 'a', 0, 'finished') RETURNING run_id) SELECT * FROM d",
    "WITH d AS (UPDATE runs SET status = 'failed' RETURNING run_id) SELECT * FROM d",
    "SELECT * FROM runs UNION ALL (WITH d AS (UPDATE runs SET status = 'x' RETURNING *) SELECT * FROM d)",
    "SELECT * FROM (WITH d AS (DELETE FROM events RETURNING 1) SELECT * FROM d)",
    "INSERT INTO runs SELECT * FROM runs RETURNING *",
    "UPDATE runs SET status = 'failed'",
    "EXPLAIN ANALYZE DELETE FROM events",
    "EXPLAIN ANALYZE UPDATE runs SET status = 'failed'",
    "EXPLAIN ANALYZE CREATE TABLE x AS SELECT 1",
    "EXPLAIN ANALYZE SELECT 1",
    "EXPLAIN (ANALYZE) SELECT 1",
    "EXPLAIN /* hidden */ ANALYZE SELECT 1",
    "EXPLAIN DELETE FROM events",
    "EXPLAIN WITH d AS (DELETE FROM events RETURNING 1) SELECT * FROM d",
    "COPY events TO 'out.csv'",
    "COPY (SELECT * FROM events) TO 'out.parquet' (FORMAT parquet)",
    "EXPORT DATABASE 'dumpdir'",
    "ATTACH ':memory:' AS scratch",
    "DETACH scratch",
    "INSTALL httpfs",
    "LOAD httpfs",
    "PRAGMA enable_profiling",
    "SET enable_external_access = true",
    "SET lock_configuration = false",
    "RESET memory_limit",
    "CALL duckdb_secrets()",
    "CREATE TEMP TABLE t AS SELECT 1",
    "CREATE MACRO leak(x) AS x",
    "CREATE VIEW v AS SELECT 1",
    "CREATE SECRET s (TYPE s3, KEY_ID 'a', SECRET 'b')",
    "BEGIN TRANSACTION",
    "CHECKPOINT",
    "VACUUM",
    "PIVOT runs ON status",
    "",
    "SELEKT 1",
]

# they parse as queries: the plan check or the locked-down connection refuses them when they run
LOCKED_OUT = [
    "SELECT * FROM checkpoint()",
    "SELECT * FROM force_checkpoint()",
    "SUMMARIZE SELECT * FROM checkpoint()",
    "SELECT (SELECT count(*) FROM checkpoint())",
    "WITH c AS MATERIALIZED (SELECT * FROM checkpoint()) SELECT * FROM c",
    "SELECT * FROM pragma_storage_info('events')",
    "SELECT * FROM query('DELETE FROM events RETURNING *')",
    "SELECT * FROM query('WITH d AS (DELETE FROM events RETURNING *) SELECT * FROM d')",
    "SELECT * FROM query('SET lock_configuration = false')",
    "SELECT * FROM query('COPY events TO ''out.csv''')",
    "SELECT * FROM read_text('/etc/passwd')",
    "SELECT * FROM read_blob('/etc/passwd')",
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_parquet('/etc/passwd')",
    "SELECT * FROM read_json('/etc/passwd')",
    "SELECT * FROM '/etc/passwd'",
    "SELECT * FROM glob('/etc/*')",
    "SELECT * FROM 'https://example.invalid/x.parquet'",
    "SELECT * FROM read_parquet('https://example.invalid/x.parquet')",
    "SELECT * FROM duckdb_secrets()",
    "SELECT getenv('HOME')",
]

ALLOWED = [
    "SELECT count(*) FROM events",
    "SELECT ';' AS semi -- DELETE FROM events",
    "/* DELETE */ SELECT run_id FROM runs",
    "FROM runs",
    "DESCRIBE events",
    "SHOW TABLES",
    "SUMMARIZE runs",
    "EXPLAIN SELECT * FROM events",
    "WITH r AS (SELECT run_id FROM runs) SELECT * FROM r",
    "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t WHERE n < 3) SELECT sum(n) FROM t",
    "SELECT * FROM run_summary",
    "SELECT kind, count(*) FROM events GROUP BY ALL",
]


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """A log of one run, made once: each test gets its own copy (making a log is most of a test's time)."""
    path = tmp_path_factory.mktemp("template") / "log.duckdb"
    with EventLog(path) as log:
        log.write_batch(_batch())
    return path


@pytest.fixture
def log_file(tmp_path, template):
    """A fresh copy of the template log, alone in its folder."""
    return Path(shutil.copy(template, tmp_path / "log.duckdb"))


def _batch():
    payload = ev.encode(ev.AnswerGiven(text="hello"))
    return Batch(
        runs=[RunRow("r1", "t", 0, "gold", 0, started_at=datetime(2026, 1, 1, tzinfo=UTC))],
        events=[EventRow("r1", 1, "AnswerGiven", datetime(2026, 1, 1, tzinfo=UTC), 1, "agent", None, payload)],
    )


def _counts(path):
    with EventLog(path, read_only=True) as log:
        return log.query(
            "SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM runs),"
            " (SELECT list(status) FROM runs), (SELECT count(*) FROM duckdb_tables())"
        )[1][0]


@pytest.mark.parametrize("sql", REFUSED)
def test_check_query_refuses(sql):
    with pytest.raises(StoreError):
        check_query(sql)


@pytest.mark.parametrize("sql", ALLOWED)
def test_check_query_allows_reads(sql):
    check_query(sql)


@pytest.mark.parametrize("sql", REFUSED + LOCKED_OUT)
def test_offline_fae_sql_refuses_with_one_line_and_changes_nothing(tmp_path, log_file, sql):
    path = log_file
    before = _counts(path)
    result = runner.invoke(app, ["sql", "--log", str(path), "--", sql], catch_exceptions=False)
    assert result.exit_code == 1, result.output
    assert "error:" in result.output and "Traceback" not in result.output, result.output
    assert _counts(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.duckdb"], "a statement wrote a file"


@pytest.mark.parametrize("sql", ALLOWED)
def test_offline_fae_sql_runs_reads(tmp_path, log_file, sql):
    path = log_file
    result = runner.invoke(app, ["sql", "--log", str(path), "--json", "--", sql], catch_exceptions=False)
    assert result.exit_code == 0, result.output


def test_files_beside_the_log_cannot_be_read(tmp_path, log_file):
    """The token file and other files next to the log are out of reach (DuckDB allows only the log's own files)."""
    path = log_file
    (tmp_path / "log.duckdb.live.json").write_text('{"token": "TOKEN-NOT-FOR-SQL"}')
    (tmp_path / "notes.txt").write_text("private")
    for sql in (
        f"SELECT * FROM read_text('{tmp_path}/log.duckdb.live.json')",
        f"SELECT * FROM read_json('{tmp_path}/log.duckdb.live.json')",
        f"SELECT content FROM read_blob('{tmp_path}/notes.txt')",
        f"SELECT * FROM glob('{tmp_path}/*')",
    ):
        result = runner.invoke(app, ["sql", "--log", str(path), "--", sql])
        assert result.exit_code == 1 and "not allowed" in result.output, (sql, result.output)
        assert "TOKEN-NOT-FOR-SQL" not in result.output and "private" not in result.output


ROOMY = Budget(time_s=120.0, max_rows=1000, max_bytes=1024 * 1024, memory_limit="256MB")
HURRIED = Budget(time_s=1.0, max_rows=1000, max_bytes=1024 * 1024, memory_limit="256MB")


@pytest.fixture
async def live(tmp_path, request):
    """A log held open by a writer (as during a recording) with its live endpoint, and a reader of it."""
    path = tmp_path / "live.duckdb"
    budget = getattr(request, "param", ROOMY)
    log = EventLog(path, settings=budget.settings)  # a locked connection takes no new memory limit later
    async with open_writer(log) as writer:
        await writer.write(
            runs=[RunRow("r1", "t", 0, "gold", 0, started_at=datetime(2026, 1, 1, tzinfo=UTC))],
            events=[Stamped("r1", ev.AnswerGiven(text="hello"), actor="agent")],
        )
        await writer.flush()
        with LiveQueryServer(log, budget) as server:
            with LogReader(path) as reader:
                assert reader.live
                yield server, reader, writer
    log.close()


def _live_counts(reader):
    return reader.query(
        "SELECT (SELECT count(*) FROM events), (SELECT list(status) FROM runs), (SELECT count(*) FROM duckdb_tables())"
    )[1][0]


@pytest.mark.anyio
async def test_live_endpoint_refuses_every_bypass_and_keeps_recording(live, tmp_path):
    server, reader, writer = live
    before = _live_counts(reader)
    for sql in REFUSED + LOCKED_OUT:
        with pytest.raises(StoreError) as caught:
            reader.query(sql)
        assert "\n" not in str(caught.value), f"{sql!r}: {caught.value}"
    assert _live_counts(reader) == before
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("live.duckdb")) == []
    for sql in ALLOWED:
        reader.query(sql)
    # the writer was never disturbed: it still appends
    await writer.write(events=[Stamped("r1", ev.AnswerGiven(text="after"), actor="agent")])
    await writer.flush()
    assert _live_counts(reader)[0] == before[0] + 1


@pytest.mark.anyio
async def test_live_budgets_cancel_big_queries_and_the_next_query_works(live):
    server, reader, writer = live
    with pytest.raises(StoreError, match="more than 1000 rows"):
        reader.query("SELECT * FROM range(10000000)")
    with pytest.raises(StoreError, match="MiB"):
        reader.query("SELECT repeat('x', 100000) FROM range(100)")
    with pytest.raises(StoreError, match="memory budget"):
        reader.query("SELECT list(range) FROM range(100000000)")
    assert reader.query("SELECT current_setting('memory_limit')")[1][0][0].endswith("MiB")
    assert reader.query("SELECT count(*) FROM runs")[1] == [(1,)]
    await writer.write(events=[Stamped("r1", ev.AnswerGiven(text="after"), actor="agent")])
    await writer.flush()
    assert reader.query("SELECT count(*) FROM events")[1] == [(2,)]


@pytest.mark.anyio
@pytest.mark.parametrize("live", [HURRIED], indirect=True)
async def test_a_query_past_its_time_budget_is_cancelled_and_recording_goes_on(live):
    server, reader, writer = live
    with pytest.raises(StoreError, match="s budget and was cancelled"):
        reader.query("SELECT count(*) FROM range(1000000) a, range(1000000000) b WHERE a.range + b.range = -1")
    assert reader.query("SELECT count(*) FROM runs")[1] == [(1,)]
    await writer.write(events=[Stamped("r1", ev.AnswerGiven(text="after"), actor="agent")])
    await writer.flush()
    assert reader.query("SELECT count(*) FROM events")[1] == [(2,)]


@pytest.mark.anyio
async def test_malformed_requests_get_400_and_a_wrong_token_403(live):
    server, reader, writer = live
    info = live_file(reader.path)
    port, token = json.loads(info.read_text())["port"], server.token
    url = f"http://127.0.0.1:{port}/sql"
    headers = {"x-fae-token": token}
    for body in (
        b"[1, 2]",
        b"not json",
        b'"just a string"',
        b'{"sql": 5}',
        b'{"sql": "SELECT 1", "params": 3}',
        b"\xff\xfe",
        b'{"sql": ""}',
    ):
        reply = httpx.post(url, content=body, headers=headers)
        assert reply.status_code == 400, (body, reply.text)
        assert "bad request" in reply.json()["error"], reply.text
    huge = httpx.post(url, content=b" " * (2 * 1024 * 1024), headers=headers)
    assert huge.status_code == 400, huge.text
    for bad in ({}, {"x-fae-token": token[:-1]}, {"x-fae-token": token + "0"}, {"x-fae-token": ""}):
        assert httpx.post(url, json={"sql": "SELECT 1"}, headers=bad).status_code == 403
    ok = httpx.post(url, json={"sql": "SELECT ?::INTEGER AS x", "params": [7]}, headers=headers)
    assert ok.status_code == 200 and ok.json()["rows"] == [[7]], ok.text


LOCKED_SETTINGS = (
    "SELECT current_setting('enable_external_access'), current_setting('autoinstall_known_extensions'),"
    " current_setting('autoload_known_extensions'), current_setting('lock_configuration')"
)


def test_the_offline_connection_is_locked_down(tmp_path, log_file):
    path = log_file
    with LogReader(path) as reader:
        assert not reader.live
        assert reader.query(LOCKED_SETTINGS)[1] == [(False, False, False, True)]


@pytest.mark.anyio
async def test_the_live_connection_is_locked_down(live):
    server, reader, writer = live
    assert reader.query(LOCKED_SETTINGS)[1] == [(False, False, False, True)]
    assert reader.query("SELECT current_setting('memory_limit')")[1][0][0] in ("244.1 MiB", "256.0 MiB")
