"""Grow a recorded log to N runs the way repeats grow a real one: each copy gets its own bodies.

A repeat of a task makes new bodies (server-assigned times, sandbox ids,
exchange ids), so its blobs hash differently; only the seed bundle is shared by
every repeat of a variation. A copy here rewrites, inside every body and every
event payload of the run it copies, the sandbox id, the exchange ids and the
server timestamps (shifted by the copy number, in milliseconds, so their order
is kept), then stores the bodies under their new content hashes. The rewrite
is the same function for every body of a run, so a copy is judged exactly like
its original. ``shared_bodies=True`` gives the old, easier log: copies share
every body.

Past ``block`` runs (10,000 by default) the log grows faster by whole blocks
(``grow_blocks``): one SQL statement per table copies the first ``block`` runs
again, each body under a new hash of its own (the last four hex digits say the
block) and every event naming it rewritten to match; the seed bundles stay
shared. A block's bodies are its first block's bytes under new names, so the
loader finds, caches and reads them exactly as it does distinct bodies.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

import duckdb

from fae.store.log import Batch, EventLog, EventRow, RunRow

_HASH = re.compile(rb"[0-9a-f]{64}")
_SANDBOX = re.compile(rb"sb-[0-9a-f]{20}")
_EXCHANGE = re.compile(rb'"exchange_id":"([0-9a-f]{32})"')
_INSTANT = re.compile(rb"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})Z")


@dataclass
class _Template:
    run: tuple
    events: list[tuple]
    hashes: set[bytes]


def _derived(token: bytes, copy: int, width: int) -> bytes:
    return hashlib.blake2b(token + b"/%d" % copy, digest_size=16).hexdigest().encode()[:width]


class _Copier:
    """The rewrite for one copy number: the same token always maps to the same new token."""

    def __init__(self, copy: int):
        self.copy = copy
        self.hashes: dict[bytes, bytes] = {}

    def _sandbox(self, m: re.Match) -> bytes:
        return b"sb-" + _derived(m.group(0), self.copy, 20)

    def _instant(self, m: re.Match) -> bytes:
        moment = datetime.fromisoformat(m.group(1).decode()) + timedelta(milliseconds=self.copy)
        return moment.isoformat(timespec="milliseconds").encode() + b"Z"

    def body(self, data: bytes) -> bytes:
        return _INSTANT.sub(self._instant, _SANDBOX.sub(self._sandbox, data))

    def payload(self, text: bytes) -> bytes:
        text = _SANDBOX.sub(self._sandbox, text)
        text = _EXCHANGE.sub(lambda m: b'"exchange_id":"' + _derived(m.group(1), self.copy, 32) + b'"', text)
        return _HASH.sub(lambda m: self.hashes.get(m.group(0), m.group(0)), text)


def grow(path: str, runs: int, *, shared_bodies: bool = False, block: int = 10_000) -> int:
    """Add copies of the log's repeat-0 runs until it holds ``runs`` runs (whole blocks past ``block``)."""
    if shared_bodies:
        return grow_copies(path, runs, shared_bodies=True)
    have = grow_copies(path, min(runs, block))
    return grow_blocks(path, runs, have) if runs > have else have


def grow_blocks(path: str, runs: int, block: int) -> int:
    """Copy the log's first ``block`` runs (in written order) again and again until it holds ``runs``.

    In copy k every run id gets ``.bk``, repeats are shifted past the first block's, and every body
    hash but the seeds' ends in k's four hex digits, in the events (payloads) and in ``blobs`` alike.
    """
    with EventLog(path) as log:
        con = log.con
        con.execute(
            "CREATE TEMP TABLE first_block AS SELECT run_id FROM runs"
            " ORDER BY (SELECT min(rowid) FROM events e WHERE e.run_id = runs.run_id) NULLS LAST, run_id"
            f" LIMIT {int(block)}"
        )
        con.execute(
            "CREATE TEMP TABLE seeds AS SELECT DISTINCT run_id,"
            " regexp_extract(CAST(payload AS VARCHAR), '[0-9a-f]{64}') AS seed FROM events"
            " WHERE kind = 'SandboxSeeded' AND run_id IN (SELECT run_id FROM first_block)"
        )
        con.execute(
            "CREATE TEMP TABLE run_blobs AS SELECT DISTINCT run_id, h AS hash FROM"
            " (SELECT run_id, unnest(regexp_extract_all(CAST(payload AS VARCHAR), '[0-9a-f]{64}')) AS h"
            "  FROM events WHERE run_id IN (SELECT run_id FROM first_block))"
            " WHERE h NOT IN (SELECT seed FROM seeds)"
        )
        (shift,) = con.execute("SELECT max(repeat) + 1 FROM runs").fetchone()
        (have,) = con.execute("SELECT count(*) FROM runs").fetchone()
        copy = 0
        while have < runs:
            copy += 1
            take = min(block, runs - have)
            tag = f"{copy:04x}"[-4:]
            con.execute("BEGIN TRANSACTION")
            con.execute(f"CREATE OR REPLACE TEMP TABLE these AS SELECT run_id FROM first_block LIMIT {take}")
            con.execute(
                "INSERT INTO blobs (hash, size, data) SELECT left(hash, 60) || ?, size, data FROM blobs"
                " WHERE hash IN (SELECT hash FROM run_blobs WHERE run_id IN (SELECT run_id FROM these))"
                " ORDER BY rowid",
                [tag],
            )
            con.execute(
                "INSERT INTO runs SELECT * REPLACE (run_id || ? AS run_id, repeat + ? AS repeat)"
                " FROM runs WHERE run_id IN (SELECT run_id FROM these)",
                [f".b{copy}", shift * copy],
            )
            # every hash gets the block's digits; the run's seed (one per run) is then given back its own name
            con.execute(
                "INSERT INTO events SELECT e.run_id || ? AS run_id, seq, kind, wall_time, mono_ns, actor,"
                " upstream, replace(regexp_replace(CAST(payload AS VARCHAR), '([0-9a-f]{60})[0-9a-f]{4}',"
                "   '\\1' || ?, 'g'), coalesce(left(s.seed, 60) || ?, ''), coalesce(s.seed, ''))"
                " FROM events e LEFT JOIN seeds s USING (run_id)"
                " WHERE e.run_id IN (SELECT run_id FROM these) ORDER BY e.rowid",
                [f".b{copy}", tag, tag],
            )
            con.execute("COMMIT")
            have += take
        con.execute("CHECKPOINT")
    return have


def grow_copies(path: str, runs: int, *, shared_bodies: bool = False) -> int:
    """Add copies of the log's repeat-0 runs until it holds at least ``runs`` runs; returns the count."""
    con = duckdb.connect(path, read_only=True)
    base_runs = con.execute(
        "SELECT run_id, suite, task_id, variation, agent, repeat, status, started_at, ended_at,"
        " stop_reason FROM runs WHERE repeat = 0 ORDER BY run_id"
    ).fetchall()
    rows = con.execute(
        "SELECT e.run_id, seq, kind, wall_time, mono_ns, actor, upstream, payload FROM events e"
        " JOIN runs r USING (run_id) WHERE r.repeat = 0 ORDER BY e.run_id, seq"
    ).fetchall()
    blobs = {
        h.encode(): bytes(d) for h, d in con.execute("SELECT hash, any_value(data) FROM blobs GROUP BY hash").fetchall()
    }
    (have,) = con.execute("SELECT count(*) FROM runs").fetchone()
    con.close()
    by_run: dict[str, list[tuple]] = defaultdict(list)
    for row in rows:
        by_run[row[0]].append(row)
    seeds = set()
    templates = []
    for run in base_runs:
        events = by_run[run[0]]
        hashes = set()
        for event in events:
            found = set(_HASH.findall(event[7].encode())) & blobs.keys()
            if event[2] == "SandboxSeeded":
                seeds |= found
            hashes |= found
        templates.append(_Template(run, events, hashes))
    copy = 0
    with EventLog(path) as log:
        while have < runs:
            copy += 1
            copier = _Copier(copy)
            batch = Batch()
            for template in templates:
                if have >= runs:
                    break
                have += 1
                for old in template.hashes:
                    if shared_bodies or old in seeds:
                        continue
                    data = copier.body(blobs[old])
                    new = hashlib.sha256(data).hexdigest().encode()
                    copier.hashes[old] = new
                    batch.blobs[new.decode()] = data
                run_id, suite, task_id, variation, agent, repeat, status, started, _, _ = template.run
                new_id = f"{run_id}.c{copy}"
                shift = timedelta(milliseconds=copy)
                batch.runs.append(
                    RunRow(
                        run_id=new_id,
                        task_id=task_id,
                        variation=variation,
                        agent=agent,
                        repeat=repeat + copy,
                        suite=suite,
                        status=status,
                        started_at=started + shift if started else None,
                    )
                )
                for _, seq, kind, wall, mono, actor, upstream, payload in template.events:
                    batch.events.append(
                        EventRow(
                            new_id, seq, kind, wall + shift, mono, actor, upstream, copier.payload(payload.encode())
                        )
                    )
            log.write_batch(batch)
        log.con.execute(
            "UPDATE runs SET ended_at = b.ended_at + to_milliseconds(runs.repeat - b.repeat),"
            " stop_reason = b.stop_reason FROM runs b"
            " WHERE b.repeat = 0 AND runs.run_id = b.run_id || '.c' || CAST(runs.repeat AS VARCHAR)"
        )
        log.con.execute("CHECKPOINT")
    return have
