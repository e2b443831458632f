"""Reading a few runs or bodies of a big log reads the row groups that hold them, not the whole log.

DuckDB only decompresses the blocks a scan reads. A query that matches run ids or hashes against a list
in the same scan that reads payloads or bodies decompresses every one of them in the log before its join
drops the rows (seconds per chunk at 100,000 runs), so these reads find the row ids from the narrow
columns first. Wall time is never asserted: DuckDB's own profiler says which row groups each scan read.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fae.replay.source import BodyCache, blob_rows_by_hash, load_runs, run_ids
from fae.replay.stream import BlobLocator, ConnectionQueries, StreamStats, fetch_bodies
from fae.store import events as ev
from fae.store.bodies import body_of
from fae.store.log import EventLog

FILLER = 300_000  # rows after the recorded ones: a few of DuckDB's row groups (122,880 rows each)


@pytest.fixture(scope="module")
def big(replay_log, tmp_path_factory):
    """The replay log with FILLER more events and blobs written after its own."""
    log = tmp_path_factory.mktemp("big") / "big.duckdb"
    shutil.copy(replay_log, log)
    with EventLog(log) as opened:
        # run ids on both sides of the recorded ones, so no row group's min and max rule a recorded id out
        opened.con.execute(
            "INSERT INTO events SELECT (CASE WHEN i % 2 = 0 THEN 'a' ELSE 'z' END) || '-filler-' || i,"
            " 0, 'Filler', TIMESTAMPTZ '2026-01-01', 0, NULL, NULL, '{\"filler\": ' || i || '}'"
            " FROM range(?) t(i)",
            [FILLER],
        )
        opened.con.execute(
            "INSERT INTO blobs (hash, size, data) SELECT sha256('filler-' || i), 64,"
            " encode(sha256('body-' || i)) FROM range(?) t(i)",
            [FILLER],
        )
    return log


def profiled_log(path: Path, profile: Path) -> EventLog:
    """The log opened with DuckDB's JSON profile of each query written to ``profile`` (set before its lock)."""
    settings = {"enable_profiling": "json", "profiling_output": str(profile)}
    return EventLog(path, read_only=True, settings=settings, files=[profile])


class Profiled:
    """A log's connection (opened by ``profiled_log``) whose every query's table scans are recorded from its profile."""

    def __init__(self, con, path: Path, profile: Path):
        self.con = con
        self.path = path
        self.profile = profile
        self.scans: list[dict] = []

    def query(self, sql, params=None):
        result = self.con.execute(sql, params or [])
        columns = [d[0] for d in result.description or []]
        rows = result.fetchall()
        self._collect(json.loads(self.profile.read_text()))
        return columns, rows

    def execute(self, sql, params=None):
        columns, rows = self.query(sql, params)
        return _Result(columns, rows)

    def _collect(self, node: dict) -> None:
        for child in node.get("operator", []) + node.get("children", []):
            if child.get("type") == "TABLE_SCAN":
                self.scans.append(
                    {
                        "columns": child["extra_info"].get("Projections"),
                        "read": child.get("row_groups_scanned"),
                        "of": child.get("total_row_groups_to_scan"),
                    }
                )
            self._collect(child)

    def reading(self, column: str) -> list[dict]:
        """The scans that read this column."""
        return [s for s in self.scans if column in (s["columns"] if isinstance(s["columns"], list) else [s["columns"]])]


class _Result:
    def __init__(self, columns, rows):
        self.description = [(c,) for c in columns]
        self._rows = rows

    def fetchall(self):
        return self._rows


def _only_their_row_groups(scans: list[dict]) -> None:
    assert scans, "no scan read the column"
    for scan in scans:
        assert scan["of"] >= 3, scan  # the log spans several row groups ...
        assert scan["read"] <= 1, scan  # ... and only the one holding the recorded rows was read


def test_loading_a_run_reads_its_events_and_bodies_row_groups_alone(big, tmp_path):
    with profiled_log(big, tmp_path / "profile.json") as log:
        ids = [i for i in run_ids(log) if "-filler-" not in i]
        profiled = Profiled(log.con, log.path, tmp_path / "profile.json")
        run = next(load_runs(profiled, [ids[-1]], lean=True))
        seeded = run.first(ev.SandboxSeeded)
        assert seeded is not None and isinstance(seeded.event, ev.SandboxSeeded)
        assert run.body(seeded.event.seed_blob)  # from the bodies fetched with the run
        whole = next(load_runs(log, [ids[-1]], lean=True))  # the same run read without the profiler
    assert run.run_id == ids[-1] and len(run.events) > 5 and run.events == whole.events
    _only_their_row_groups(profiled.reading("payload"))
    _only_their_row_groups(profiled.reading("data"))


def test_bodies_looked_up_by_hash_are_read_from_their_row_groups_alone(big, tmp_path):
    with profiled_log(big, tmp_path / "profile.json") as log:
        wanted = [h for (h,) in log.con.execute("SELECT hash FROM blobs WHERE rowid < 5").fetchall()]
        expected = {
            h: body_of(log.path, h, data, external)
            for h, data, external in log.con.execute(
                "SELECT hash, data, external FROM blobs WHERE rowid < 5"
            ).fetchall()
        }
        profiled = Profiled(log.con, log.path, tmp_path / "profile.json")
        rows = blob_rows_by_hash(profiled, wanted)
        found = {h: body_of(log.path, h, data, external) for h, _, data, external in rows}
        assert found == expected and len(found) == len(set(wanted))
        _only_their_row_groups(profiled.reading("data"))

        cache = BodyCache(profiled)  # the chunked loader's bulk fetch
        profiled.scans.clear()
        cache.prefetch(wanted)
        assert {h: cache.cached(h) for h in wanted} == expected
        _only_their_row_groups(profiled.reading("data"))


def test_the_streams_bodies_behind_its_walk_are_read_from_their_row_groups_alone(big, tmp_path):
    """The one-pass loader's slow path: bodies the walk cannot reach (each repeat's seed, at the log's start)."""
    with profiled_log(big, tmp_path / "profile.json") as log:
        wanted = {h for (h,) in log.con.execute("SELECT hash FROM blobs WHERE rowid < 5").fetchall()}
        locator = BlobLocator(log.con, window=64, look_ahead=64)
        locator.seek(FILLER)  # walking the filler, far past the bodies asked for
        profiled = Profiled(log.con, log.path, tmp_path / "profile.json")
        stats = StreamStats()
        cache = BodyCache(ConnectionQueries(log.con, log.path))
        got = fetch_bodies(
            profiled, lambda h, data, external: body_of(log.path, h, data, external), cache, locator, wanted, stats
        )
        locator.close()
    assert got.keys() == wanted and all(got.values())
    assert stats.by_hash == len(wanted), stats  # the slow path was the one taken
    _only_their_row_groups(profiled.reading("data"))
