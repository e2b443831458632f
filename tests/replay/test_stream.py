"""The one-pass loader reads exactly what the chunked loader reads, finds bodies by position, and stays right
when a body lies far behind its run."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench.grow_log import grow
from fae.errors import StoreError
from fae.replay.export_source import export_runs, locate_export, reading_connection
from fae.replay.source import load_runs, needed_hashes, run_ids
from fae.replay.stream import BlobLocator, Span, StreamStats, shards, spans, stream_runs
from fae.store.export import export_parquet, query_parquet
from fae.store.log import Batch, EventLog, blob_hash


@pytest.fixture(scope="module")
def grown(replay_log, tmp_path_factory):
    """The replay log grown to 40 runs, each copy with its own bodies."""
    log = tmp_path_factory.mktemp("stream") / "grown.duckdb"
    shutil.copy(replay_log, log)
    assert grow(str(log), 40) == 40
    return log


def _seen(run) -> tuple:
    """A run as the judges see it: its events and every body they read."""
    rows = [
        (r.seq, None, r.event.__struct_config__.tag, r.wall_us, r.mono_ns, r.actor, r.upstream, None)
        for r in run.events
    ]
    bodies = {}
    for recorded in run.events:
        for name in ("seed_blob", "state_blob", "request_blob", "response_blob", "decoded_blob"):
            hash_ = getattr(recorded.event, name, None)
            if hash_:
                bodies[hash_] = run.body(hash_)
    return run.run_id, run.status, [(r.seq, r.actor, r.event) for r in run.events], bodies, rows and len(rows)


def test_stream_reads_what_the_chunked_loader_reads(grown):
    with EventLog(grown, read_only=True) as log:
        ids = run_ids(log)
        expected = {run.run_id: _seen(run) for run in load_runs(log, ids, lean=True)}
        stats = StreamStats()
        got = {run.run_id: _seen(run) for run in stream_runs(log.con, log.path, spans(log, ids), stats=stats, chunk=7)}
    assert got.keys() == expected.keys() and len(got) == 40
    for run_id, seen in expected.items():
        assert got[run_id] == seen, run_id
    assert all(seen[3] and all(body is not None for body in seen[3].values()) for seen in got.values())
    # bodies came by position; only what the shared cache already held was not read again
    assert stats.by_position > 0 and stats.by_hash == 0, stats


def test_a_body_far_behind_its_run_is_found_by_hash(grown):
    """With a hash window too small to hold the seeds, the loader falls back to a lookup by hash: slower, same runs."""
    with EventLog(grown, read_only=True) as log:
        ids = run_ids(log)
        expected = {run.run_id: _seen(run) for run in load_runs(log, ids, lean=True)}
        stats = StreamStats()
        got = {
            run.run_id: _seen(run)
            for run in stream_runs(log.con, log.path, spans(log, ids), stats=stats, chunk=3, window=4)
        }
    assert got == expected
    assert stats.by_hash > 0, stats


def test_shards_cover_every_run_once_in_written_order(grown):
    with EventLog(grown, read_only=True) as log:
        found = spans(log, run_ids(log))
    for count in (1, 2, 3, 7, 100):
        parts = shards(found, count)
        assert [s for part in parts for s in part] == found
        assert len(parts) <= min(count, len(found)) and all(part for part in parts)
        if count <= 3:  # a few shards of about equal events each
            assert len(parts) == count
            sizes = [sum(s.events for s in part) for part in parts]
            assert max(sizes) - min(sizes) <= 2 * max(s.events for s in found), sizes
    firsts = [s.first for s in found]
    assert firsts == sorted(firsts)


def test_shards_of_one_log_stream_to_the_whole(grown):
    with EventLog(grown, read_only=True) as log:
        found = spans(log, run_ids(log))
        streamed = [run.run_id for part in shards(found, 3) for run in stream_runs(log.con, log.path, part)]
    assert sorted(streamed) == sorted(s.run_id for s in found) and len(set(streamed)) == len(streamed)


def test_a_subset_streams_only_its_runs(grown):
    with EventLog(grown, read_only=True) as log:
        ids = run_ids(log)[::5]
        got = [run.run_id for run in stream_runs(log.con, log.path, spans(log, ids))]
    assert sorted(got) == sorted(ids)


def test_an_unknown_run_is_an_error(grown):
    with EventLog(grown, read_only=True) as log, pytest.raises(StoreError, match="no run 'nope'"):
        list(stream_runs(log.con, log.path, [Span("nope", -1, -1, 0)]))


def test_needed_hashes_name_the_bodies_judges_read(grown):
    with EventLog(grown, read_only=True) as log:
        _, rows = log.query(
            "SELECT run_id, seq, kind, 0, 0, actor, upstream, payload FROM events"
            " WHERE kind IN ('SandboxSeeded', 'StateCaptured')"
        )
    assert len(set(needed_hashes(rows))) >= 2


def test_a_walk_out_of_reach_of_the_bodies_moves_to_them(tmp_path):
    """Bodies far ahead of the walk are not found by walking; once their place is known the walk moves there."""
    bodies = [b"body %d" % n for n in range(12_000)]
    with EventLog(tmp_path / "blobs.duckdb") as log:
        log.write_batch(Batch(blobs={blob_hash(b): b for b in bodies}))
        _, rows = log.query("SELECT hash, rowid FROM blobs")
        where = dict(rows)
        locator = BlobLocator(log.con, window=2_000, look_ahead=1_000)
        near = [blob_hash(b) for b in bodies[:5]]
        far = [h for h, rowid in where.items() if 10_000 <= rowid < 10_010]
        locator.seek(0)
        assert locator.find(near).keys() == set(near)
        assert locator.find(far) == {}  # out of reach: the walk gives up after look_ahead rows
        locator.drifted([locator.position - 10, locator.position + 10])  # within reach: the walk stays
        assert locator.seeks == 1
        locator.drifted([where[h] for h in far])
        assert locator.seeks == 2
        assert locator.find(far) == {h: where[h] for h in far}
        locator.close()


def test_a_walk_moves_back_to_bodies_behind_where_it_began(tmp_path):
    """Bodies just behind the walk's start were never walked (an export's events may wrap around to its first
    bodies): once their place is known the walk moves back there, though they lie within its window."""
    bodies = [b"body %d" % n for n in range(12_000)]
    with EventLog(tmp_path / "blobs.duckdb") as log:
        log.write_batch(Batch(blobs={blob_hash(b): b for b in bodies}))
        where = dict(log.query("SELECT hash, rowid FROM blobs")[1])
        locator = BlobLocator(log.con, window=8_192, look_ahead=20)
        behind = [h for h, rowid in where.items() if 4_000 <= rowid < 4_010]
        locator.seek(5_000)
        assert locator.find(behind) == {}  # the walk goes forward only
        assert locator.position - locator.window < min(where[h] for h in behind)  # within the window's reach
        locator.drifted([where[h] for h in behind])
        assert locator.seeks == 2
        assert locator.find(behind) == {h: where[h] for h in behind}
        locator.close()


def test_a_few_old_bodies_the_walk_missed_do_not_move_it(tmp_path):
    """A shard's first chunk reads each repeat's seed bundle, stored at the log's start, beside bodies the walk finds
    where it is: the seeds are looked up by hash once and cached, and the walk stays. (It used to move back to
    them, and every body of the next chunks was then looked up by hash: 1,103 of them, 15 % of a 50,000-run
    shard's CPU.) A chunk whose bodies it mostly missed still moves it."""
    bodies = [b"body %d" % n for n in range(12_000)]
    with EventLog(tmp_path / "blobs.duckdb") as log:
        log.write_batch(Batch(blobs={blob_hash(b): b for b in bodies}))
        where = dict(log.query("SELECT hash, rowid FROM blobs")[1])
        locator = BlobLocator(log.con, window=8_192, look_ahead=1_000)
        seeds = [h for h, rowid in where.items() if rowid < 5]
        here = [h for h, rowid in where.items() if 8_000 <= rowid < 8_050]
        locator.seek(8_000)
        assert locator.find(seeds + here).keys() == set(here)
        locator.drifted([where[h] for h in seeds], served=len(here))
        assert locator.seeks == 1
        assert locator.find([h for h, rowid in where.items() if 8_050 <= rowid < 8_100])  # the walk goes on here
        locator.drifted([where[h] for h in seeds], served=len(seeds) - 1)  # most of a chunk missed: move
        assert locator.seeks == 2
        locator.close()


def _groups(runs) -> list[tuple[str, int]]:
    """The (task, variation) of each run, with a repeat of the one before it left out."""
    return _groups_of([(run.task_id, run.variation) for run in runs])


def _groups_of(keys: list[tuple[str, int]]) -> list[tuple[str, int]]:
    return [key for index, key in enumerate(keys) if index == 0 or keys[index - 1] != key]


def test_a_chunks_runs_come_out_grouped_by_variation(grown):
    """The grown log's copies take turns (a, b, c, a, b, c ...); a chunk hands each variation's runs out together,
    every run once, with the same events and bodies."""
    with EventLog(grown, read_only=True) as log:
        ids = run_ids(log)
        found = spans(log, ids)
        loaded = {run.run_id: run for run in load_runs(log, ids, lean=True)}
        grouped = list(stream_runs(log.con, log.path, found, chunk=len(ids)))  # the whole log is one chunk
        written = [loaded[s.run_id] for s in found]
        same = {run.run_id: _seen(run) for run in grouped} == {run.run_id: _seen(run) for run in written}
    variations = len(set(_groups(written)))
    assert len(_groups(written)) > 2 * variations, "the variations do not take turns: this test shows nothing"
    assert same
    assert len(grouped) == 40 and len(_groups(grouped)) == variations, _groups(grouped)


def _exported(log, tmp_path):
    """A Parquet export of a copy of the log (an export is named after its log's path)."""
    copy, directory = tmp_path / "copy.duckdb", tmp_path / "export"
    shutil.copy(log, copy)
    export_parquet(copy, directory)
    return directory


def test_an_exports_runs_come_out_grouped_by_variation(grown, tmp_path):
    """The same from a Parquet export of the log (``fae rejudge --parquet``)."""
    directory = _exported(grown, tmp_path)
    con = reading_connection()
    found = locate_export(con, directory, [row[0] for row in query_parquet(directory, "SELECT run_id FROM runs")[1]])
    runs = list(export_runs(con, found.shard(found.spans), found.spans, chunk=len(found.spans)))
    key = {run.run_id: (run.task_id, run.variation) for run in runs}
    written = [key[s.run_id] for s in found.spans]
    assert len(runs) == len(key) == 40
    assert len(_groups_of(written)) > 2 * len(set(written)), "the variations do not take turns: this test shows nothing"
    assert len(_groups_of([key[run.run_id] for run in runs])) == len(set(written))


def test_an_export_with_runs_missing_their_task_id_still_streams(grown, tmp_path):
    """An export is files anyone can write: runs whose task id is null are handed out (and judged not applicable
    later), not a TypeError from putting None beside a task id while grouping."""
    directory = _exported(grown, tmp_path)
    con = reading_connection()
    for part in (directory / "runs").rglob("*.parquet"):
        columns = [row[0] for row in con.execute(f"DESCRIBE SELECT * FROM read_parquet('{part}')").fetchall()]
        chosen = ", ".join(
            "CASE WHEN run_id LIKE '%gold%' THEN NULL ELSE task_id END AS task_id" if name == "task_id" else name
            for name in columns
        )
        con.execute(f"COPY (SELECT {chosen} FROM read_parquet('{part}')) TO '{part}.new' (FORMAT parquet)")
        Path(f"{part}.new").replace(part)
    found = locate_export(con, directory, [row[0] for row in query_parquet(directory, "SELECT run_id FROM runs")[1]])
    runs = list(export_runs(con, found.shard(found.spans), found.spans, chunk=len(found.spans)))
    assert len(runs) == 40 and 0 < sum(run.task_id is None for run in runs) < 40
