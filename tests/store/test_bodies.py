"""Large bodies in side files: scrubbed before they are written, and seen by every reader of the log."""

from __future__ import annotations

import json
import os
import stat

import anyio
import pytest
import zstandard

from fae.harness.suite_runner import record_suite
from fae.harness.worklist import suite_specs
from fae.judge.rejudge import rejudge
from fae.replay.source import load_run
from fae.store import bodies
from fae.store import events as ev
from fae.store.bodies import Pieces, bodies_dir, body_path
from fae.store.export import export_parquet, query_parquet
from fae.store.log import EventLog, RunRow, blob_hash
from fae.store.merge import merge_logs
from fae.store.secrets import SecretValues
from fae.store.writer import LogWriter, Stamped, open_writer

SECRET = "sk-live-0123456789abcdef"


def _stored_files(log_path):
    return [p for p in bodies_dir(log_path).rglob("*") if p.is_file()]


def test_a_secret_split_across_pieces_is_scrubbed_as_if_the_body_were_whole():
    secrets = SecretValues([SECRET])
    whole = b"a" * 5000 + SECRET.encode() + b"b" * 3000 + json.dumps(SECRET).encode() + b"c" * 100
    for cut in (4990, 5001, 5010, 5023, 5024, 8030):
        pieces = [whole[:cut], whole[cut : cut + 7], whole[cut + 7 :]]
        assert b"".join(secrets.scrub_stream(pieces)) == secrets.scrub_bytes(whole), cut
    untouched = [b"x" * 10, b"y" * 10]
    # nothing to scrub: the same bytes (fae's credentials are looked for even when no secret is known)
    assert b"".join(SecretValues().scrub_stream(untouched)) == b"".join(untouched)


@pytest.mark.anyio
async def test_a_large_body_is_scrubbed_before_its_side_file_is_written_and_its_events_follow(tmp_path):
    path = tmp_path / "log.duckdb"
    body = os.urandom((1 << 20) - 10) + b"Bearer " + SECRET.encode() + os.urandom(4096)
    pieces = Pieces(tuple(body[i : i + 65536] for i in range(0, len(body), 65536)))  # the secret straddles two
    raw_digest = blob_hash(pieces)
    with EventLog(path) as log:
        async with open_writer(log) as writer:
            writer.secrets.add(SECRET)
            writer.submit(
                runs=[RunRow(run_id="r", task_id="t", variation=0, agent="a", repeat=0)],
                events=[
                    Stamped("r", ev.SandboxSeeded(sandbox="s", fhir_base="x", resource_count=1, seed_blob=raw_digest))
                ],
                blobs={raw_digest: pieces},
            )
            await writer.flush()
        _, rows = log.query("SELECT payload->>'$.seed_blob' FROM events WHERE kind = 'SandboxSeeded'")
        (clean_digest,) = rows[0]
        assert clean_digest != raw_digest
        stored = log.blob(clean_digest)
        assert stored == body.replace(SECRET.encode(), b"[redacted]") and log.blob(raw_digest) is None
        assert log.query("SELECT size, octet_length(data), external FROM blobs WHERE hash = ?", [clean_digest])[1] == [
            (len(stored), 0, True)
        ]
    for file in _stored_files(path):  # nothing on disk ever held it, not even a half-written file
        assert SECRET.encode() not in zstandard.ZstdDecompressor().stream_reader(file.open("rb")).read()
    assert _stored_files(path) == [body_path(path, clean_digest)]


def _external_count(path) -> int:
    with EventLog(path, read_only=True) as log:
        return log.query("SELECT count(*) FROM blobs WHERE external")[1][0][0]


def test_a_run_whose_bodies_are_side_files_replays_rejudges_merges_and_exports(tmp_path, monkeypatch):
    # the threshold a deployment keeps at 1 MiB, lowered so an ordinary run's bodies all take the large path
    monkeypatch.setattr(bodies, "BODY_FILE_BYTES", 256)
    log_path = tmp_path / "side.duckdb"
    specs = suite_specs(["builtin-create-patient"], [0], ["gold"], 1)
    result = anyio.run(lambda: record_suite(log_path, specs), backend="asyncio")
    assert result.statuses.get("finished") == 1, result
    with EventLog(log_path, read_only=True) as log:
        (run_id,) = log.query("SELECT run_id FROM runs")[1][0]
        external = {h for (h,) in log.query("SELECT hash FROM blobs WHERE external")[1]}
        run = load_run(log, run_id)
        exchanged = [r.event for r in run.of(ev.HttpExchanged)]
        named = {b for e in exchanged for b in (e.request_blob, e.response_blob) if b}
        assert len(external) >= 3 and named & external, "no exchange body took the side-file path"
        sent = {}
        for event in exchanged:
            for digest, size in ((event.request_blob, event.request_size), (event.response_blob, event.response_size)):
                if digest:
                    sent[digest] = run.body(digest)
                    assert len(sent[digest]) == size, (event.path, digest)
        (captured,) = run.of(ev.StateCaptured)
        assert json.loads(run.body(captured.event.state_blob))

    judged = rejudge(log_path, workers=1, full=True)
    assert judged.runs == 1 and judged.verdicts and all(k[2] != "error" for k in judged.outcomes), judged.outcomes
    with EventLog(log_path, read_only=True) as log:
        _, live = log.query(
            "SELECT judge, outcome, passed FROM verdicts WHERE batch IS DISTINCT FROM ? ORDER BY ALL", [judged.batch]
        )
        _, again = log.query("SELECT judge, outcome, passed FROM verdicts WHERE batch = ? ORDER BY ALL", [judged.batch])
    assert again == live and any(passed for _, _, passed in again), (again, live)

    merged = tmp_path / "merged.duckdb"
    merge_logs([log_path], merged)
    export = tmp_path / "export"
    export_parquet(log_path, export)
    for stored in _stored_files(log_path):
        stored.unlink()  # the merged log and the export must not lean on the shard's files
    assert _external_count(merged) == len(external)
    for digest in external:
        for copy in (body_path(merged, digest), export / "bodies" / digest[:2] / f"{digest[2:]}.zst"):
            assert stat.S_IMODE(copy.stat().st_mode) == 0o600, copy
    with EventLog(merged, read_only=True) as log:
        merged_run = load_run(log, run_id)
        assert {digest: merged_run.body(digest) for digest in sent} == sent
    assert rejudge(merged, workers=1, full=True).outcomes == judged.outcomes
    _, rows = query_parquet(export, "SELECT count(*), sum(octet_length(data)) FROM blobs WHERE external")
    assert rows == [(len(external), 0)]


def test_a_large_body_journaled_by_a_process_that_died_is_in_the_log_when_it_is_next_opened(tmp_path):
    path = tmp_path / "log.duckdb"
    body = os.urandom(bodies.BODY_FILE_BYTES + 1)
    log = EventLog(path)
    writer = LogWriter(log)  # never run: nothing reaches DuckDB, as if the process were killed after the answer
    writer.submit(blobs={blob_hash(body): body})
    writer.journal.close()
    log.close()
    with EventLog(path) as reopened:
        assert reopened.blob(blob_hash(body)) == body
        assert reopened.query("SELECT external FROM blobs")[1] == [(True,)]
