"""Migration 5: event payloads are stored ZSTD-compressed, the rows and every view stay as they were."""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

import duckdb

from fae.store import schema
from fae.store.log import Batch, EventLog

sys.path.insert(0, str(Path(__file__).parent))

from logs import T0, finished_run


def _payload_compression(log: EventLog) -> set[str]:
    _, rows = log.query(
        "SELECT DISTINCT compression FROM pragma_storage_info('events')"
        " WHERE column_name = 'payload' AND segment_type <> 'VALIDITY'"
    )
    return {r for (r,) in rows}


def test_a_log_from_before_compression_keeps_its_events_and_views_and_compresses_payloads(tmp_path):
    path = tmp_path / "v6.duckdb"
    with EventLog(path) as log:  # written at the latest version, then taken back to 6 the way an old fae left it
        for n in range(300):
            log.write_batch(finished_run(f"r{n:03d}", start=T0 + timedelta(minutes=n), body=b"x%d" % n))
        _, before = log.query("SELECT * FROM events ORDER BY run_id, seq")
        _, summary = log.query("SELECT * FROM run_summary ORDER BY run_id")
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE plain AS SELECT * FROM events")
    con.execute("DROP TABLE events")
    con.execute("ALTER TABLE plain RENAME TO events")
    con.execute("ALTER TABLE blobs DROP COLUMN external")  # migration 8's column
    con.execute("DROP TABLE judge_facts")  # migration 9's table
    con.execute("DELETE FROM schema_version WHERE version >= 7")
    con.close()
    with EventLog(path) as log:
        assert log.schema_version() == schema.LATEST_VERSION == 9
        (digest,) = log.query("SELECT hash FROM blobs WHERE data = 'x7'")[1][0]
        assert log.blob(digest) == b"x7" and log.query("SELECT DISTINCT external FROM blobs")[1] == [(False,)]
        _, after = log.query("SELECT * FROM events ORDER BY run_id, seq")
        assert after == before and len(after) == 1200
        assert log.query("SELECT * FROM run_summary ORDER BY run_id")[1] == summary
        log.write_batch(Batch(events=[]))
        log.con.execute("CHECKPOINT")
        assert _payload_compression(log) == {"ZSTD"}
        (definition,) = log.query("SELECT sql FROM duckdb_tables() WHERE table_name = 'events'")[1][0]
    assert "USING COMPRESSION ZSTD" in definition.upper()


def test_new_rows_are_compressed_too(tmp_path):
    with EventLog(tmp_path / "new.duckdb") as log:
        for n in range(300):
            log.write_batch(finished_run(f"r{n:03d}", body=b"y%d" % n))
        log.con.execute("CHECKPOINT")
        assert _payload_compression(log) == {"ZSTD"}
