"""During a real recording, an over-budget or writing query on the live endpoint fails alone: the runs finish."""

from __future__ import annotations

import anyio
import anyio.to_thread
import pytest

from fae.errors import StoreError
from fae.harness.config import RecordConfig
from fae.harness.suite_runner import record_suite
from fae.harness.worklist import suite_specs
from fae.store.live import LogReader, live_file
from fae.store.log import EventLog

pytestmark = pytest.mark.anyio


async def test_big_and_writing_queries_during_a_recording_are_refused_and_the_runs_finish(tmp_path):
    log = tmp_path / "rec.duckdb"
    specs = suite_specs(["builtin-create-patient"], [0], ["gold"], 3)
    seen: dict[str, object] = {}

    def probe() -> None:
        with LogReader(log) as reader:
            seen["live"] = reader.live
            for name, sql in (
                ("big", "SELECT * FROM range(10000000)"),
                ("delete", "WITH d AS (DELETE FROM events RETURNING 1) SELECT count(*) FROM d"),
                ("file", "SELECT * FROM read_text('/etc/hostname')"),
            ):
                try:
                    reader.query(sql)
                    seen[name] = "ran"
                except StoreError as exc:
                    seen[name] = str(exc)
            seen["events"] = reader.query("SELECT count(*) FROM events")[1][0][0]

    async def query_while_recording() -> None:
        with anyio.fail_after(60):
            while not live_file(log).exists():
                await anyio.sleep(0.01)
        await anyio.to_thread.run_sync(probe)

    async with anyio.create_task_group() as group:
        group.start_soon(query_while_recording)
        result = await record_suite(log, specs, RecordConfig(concurrency=1))
    assert seen["live"] is True, seen
    assert "more than" in str(seen["big"]) and "rows" in str(seen["big"]), seen
    assert "modifies data" in str(seen["delete"]), seen
    assert "not allowed" in str(seen["file"]), seen
    assert dict(result.statuses) == {"finished": 3}, result
    with EventLog(log, read_only=True) as done:
        _, rows = done.query("SELECT count(*) FROM events")
    assert rows[0][0] >= int(seen["events"]), (rows, seen)
    assert rows[0][0] > 0
