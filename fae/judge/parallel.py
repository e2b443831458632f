"""Judging a log's runs on every core: shards of runs in worker processes, one writer after them.

Each worker opens the log read-only, streams its shard (fae/replay/stream.py),
judges each run with the same ``judge_run`` as the live path, and keeps the
verdict rows columnar in a Parquet file of its own. DuckDB lets no process
write a file that others read, so the parent writes after the workers are
done: one ``INSERT ... SELECT`` from the workers' files, in one transaction.
The pool is the standard library's; shards are contiguous ranges of the log
so each worker reads its own part of the file.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import socket
import stat
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from multiprocessing import forkserver, get_context
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import duckdb

from fae.errors import JudgeError, StoreError, first_line
from fae.judge.judging import Judging, judge_run, judging_for, relaxed_gc
from fae.replay.export_source import ExportShard, export_runs, reading_connection
from fae.replay.source import RunLog, load_runs
from fae.replay.stream import CHUNK_RUNS, Span, StreamStats, stream_runs
from fae.store.log import EventLog, FactsRow, VerdictRow

_VERDICT_COLUMNS = (
    "run_id VARCHAR, judge VARCHAR, rule_set JSON, rule_set_hash VARCHAR, code_version VARCHAR,"
    " outcome VARCHAR, passed BOOLEAN, evidence JSON, judged_at TIMESTAMPTZ, batch VARCHAR"
)

_COLUMN_NAMES = ", ".join(part.split()[0] for part in _VERDICT_COLUMNS.split(", "))
_FACTS_COLUMNS = "run_id VARCHAR, judge VARCHAR, inputs VARCHAR, code_version VARCHAR, facts JSON"

READ_MEMORY = "128MB"
EXPORT_EVENTS_MEMORY = "512MB"  # an export written before its row groups were small decodes ~100 MB of payloads at once
RUNS_PER_WORKER = 2_500
"""Where only the run count is known (``fae compare``, a Parquet export): at most one worker per this many runs,
``EVENTS_PER_WORKER`` at a gold run's ~22 lean events."""
EVENTS_PER_WORKER = 50_000
"""The default starts a worker for each this many (lean) events to judge, up to the cores. Measured with
bench/bench_rejudge.py on 2 cores (bench/RESULTS.md): one worker judges ~45 µs per event, a second one starts
~0.5 s later, so on a quiet machine two break even near 22,000 events (~1,000 gold runs); on a loaded one two
workers took 1.26x the wall time of one at 44,000 events. 50,000 keeps a small log on one worker, where it is
never slower; at 222,000 events (10,000 runs) two are 1.56x faster for 1.09x the CPU."""
SPILL_ROWS = 10_000
"""Verdict and findings rows a spool holds before it writes them to Parquet: at 30,000 a one-rule rejudge of
100,000 runs held ~85 MiB of them at its peak, at 10,000 ~30 MiB (bench/RESULTS.md)."""
PLANNING_MEMORY = "64MB"
"""DuckDB's memory in the process that plans a rejudge and writes its verdicts: its cache of what it scanned (the
runs, the standing verdicts, the kept findings) otherwise grew with the log, 360 MiB peak at 100,000 runs against
209 with this limit; the full path's wall grows ~5 % (its verdicts go to the file sooner)."""


@dataclass(frozen=True)
class ShardJob:
    """What one worker judges: its runs' spans, the judges by name and rules, and where its verdicts go."""

    log_path: str
    spans: tuple[Span, ...]
    judges: tuple[tuple[str, dict[str, Any]], ...]
    judged_at: datetime
    batch: str | None
    out: str | None  # stem of the Parquet files for the verdict rows; None keeps (run, judge, hash, outcome, passed)
    chunk: int = CHUNK_RUNS
    export: ExportShard | None = None  # the shard's files when its runs are read from a Parquet export
    tasks: str = "log"  # where judges read each run's task (fae.judge.context.TASK_SOURCES)


@dataclass
class ShardResult:
    runs: int = 0
    verdicts: int = 0
    outcomes: Counter = field(default_factory=Counter)
    judged: list[tuple[str, str, str, str, bool | None]] = field(default_factory=list)
    stats: StreamStats = field(default_factory=StreamStats)
    cpu_s: float = 0.0  # CPU seconds the shard took in its process (measured, never used to decide anything)
    rss_mib: float = 0.0  # the peak resident memory of the process that judged it
    pid: int = 0  # the process that judged it (a local worker, this process, or a Ray worker)
    began: float = 0.0  # time.monotonic() as it began and ended (one clock for a machine's processes; measured only)
    ended: float = 0.0


_encoder = json.JSONEncoder(sort_keys=True)  # json.dumps(value, sort_keys=True), without a new encoder per call


def _json(value: Any) -> str:
    return _encoder.encode(value)


def peak_rss_mib() -> float:
    """This process's peak resident memory (VmHWM: unlike ru_maxrss it does not carry a parent's peak over exec)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def workers_default(runs: int | None = None, *, events: int | None = None) -> int:
    """All the cores this process may use, but no more than one per ``EVENTS_PER_WORKER`` events to judge (or,
    when only the runs are known, one per ``RUNS_PER_WORKER`` runs): a worker's start must pay for itself."""
    cores = max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))
    if events is not None:
        return max(1, min(cores, events // EVENTS_PER_WORKER))
    return cores if runs is None else max(1, min(cores, runs // RUNS_PER_WORKER))


def _judgings(judges: Sequence[tuple[str, dict[str, Any]]]) -> list[Judging]:
    return [judging_for(name, rules) for name, rules in judges]


def _sparse(part: Sequence[Span]) -> bool:
    """A shard whose runs are a small part of the rows they span is read by id, not streamed."""
    spanned = [s for s in part if s.events]
    if not spanned:
        return True
    width = max(s.last for s in spanned) - min(s.first for s in spanned) + 1
    return sum(s.events for s in spanned) * 4 < width


def judge_shard(job: ShardJob) -> ShardResult:
    """Judge one shard of a log (in a worker process, or in this one when there is one worker)."""
    started = time.process_time()
    result = ShardResult(began=time.monotonic())
    judgings = _judgings(job.judges)
    spool = VerdictSpool(job.out, judgings, result)
    # the findings judged beside the verdicts, for the log to keep (an export keeps none: it is rejudged from events)
    found: list[FactsRow] | None = [] if job.out and job.tasks == "log" and job.export is None else None
    with _shard_runs(job, result.stats) as runs, relaxed_gc():
        for run in runs:
            rows = judge_run(run, judgings, judged_at=job.judged_at, batch=job.batch, tasks=job.tasks, found=found)
            result.runs += 1
            spool.add(rows, found or ())
            if found:
                found.clear()
    spool.close()
    result.cpu_s = time.process_time() - started
    result.rss_mib = peak_rss_mib()
    result.pid = os.getpid()
    result.ended = time.monotonic()
    return result


class VerdictSpool:
    """Verdict rows (and the findings judged beside them, ``fae.judge.facts``) kept columnar and spilled to
    Parquet files every ``SPILL_ROWS`` rows: ``OUT-NNNNN.parquet`` and ``OUT.facts-NNNNN.parquet``, which
    ``insert_verdicts`` moves into the log. Without ``out``, the result keeps (run, judge, hash, outcome, passed)."""

    def __init__(self, out: str | None, judgings: Sequence[Judging], result: ShardResult):
        self.out, self.result = out, result
        self.rules_json = {judging.rules_hash: _json(judging.rules) for judging in judgings}  # one text per rule set
        self.sink = duckdb.connect() if out else None
        if self.sink is not None:
            self.sink.execute("SET threads = 1")
        self.pending: list[tuple] = []
        self.facts: list[tuple] = []
        self.parts = 0

    def add(self, rows: Sequence[VerdictRow], facts: Sequence[FactsRow] = ()) -> None:
        result = self.result
        result.verdicts += len(rows)
        for row in rows:
            result.outcomes[(row.judge, row.rule_set_hash, row.outcome)] += 1
            if self.sink is None:
                result.judged.append((row.run_id, row.judge, row.rule_set_hash, row.outcome, row.passed))
                continue
            self.pending.append(
                (
                    row.run_id,
                    row.judge,
                    self.rules_json[row.rule_set_hash],
                    row.rule_set_hash,
                    row.code_version,
                    row.outcome,
                    row.passed,
                    _json(row.evidence),
                    row.judged_at,
                    row.batch,
                )
            )
        if self.sink is not None:
            self.facts.extend((f.run_id, f.judge, f.inputs, f.code_version, f.facts) for f in facts)
            if len(self.pending) + len(self.facts) >= SPILL_ROWS:
                self._spill()

    def close(self) -> None:
        if self.sink is not None:
            self._spill()
            self.sink.close()

    def _spill(self) -> None:
        """Write the rows held to one more Parquet file of each kind, so a worker holds a bounded number of them."""
        assert self.sink is not None and self.out is not None
        _spill(self.sink, "verdicts", _VERDICT_COLUMNS, self.pending, f"{self.out}-{self.parts:05d}.parquet")
        _spill(self.sink, "judge_facts", _FACTS_COLUMNS, self.facts, f"{self.out}.facts-{self.parts:05d}.parquet")
        self.pending, self.facts = [], []
        self.parts += 1


@contextmanager
def _shard_runs(job: ShardJob, stats: StreamStats) -> Iterator[Iterator[RunLog]]:
    """The shard's runs, read from the log (by row id, or by id when sparse) or from the export's files."""
    if job.export is not None:
        con = reading_connection(memory=EXPORT_EVENTS_MEMORY)
        try:
            yield export_runs(con, job.export, job.spans, lean=True, chunk=job.chunk, stats=stats, memory=READ_MEMORY)
        finally:
            con.close()
        return
    # one worker, one core: DuckDB's own threads would only contend; a pass reads each block once: no need to
    # cache. In a process that has this log open already (its settings locked), those settings stay.
    with EventLog(job.log_path, read_only=True, settings={"threads": 1, "memory_limit": READ_MEMORY}) as log:
        if _sparse(job.spans):
            yield load_runs(log, [s.run_id for s in job.spans], lean=True)
        else:
            yield stream_runs(log.con, log.path, job.spans, lean=True, chunk=job.chunk, stats=stats)


def _spill(sink: duckdb.DuckDBPyConnection, table: str, columns: str, rows: list[tuple], path: str) -> None:
    """Write these rows of ``table`` to one Parquet file (none when there are none)."""
    if not rows:
        return
    sink.execute(f"CREATE TABLE {table} ({columns})")
    with sink.appender(table) as appender:
        appender.append_rows(rows)
    try:
        sink.execute(f"COPY {table} TO '{_sql_path(path)}' (FORMAT parquet)")
    except duckdb.Error as exc:
        raise JudgeError(
            f"cannot write verdicts in the temp folder ({_io_error(exc)}): a rejudge keeps its verdicts"
            " there until they all go into the log at once; free space there, or point TMPDIR at"
            " another folder, and run it again (no verdict of this one went into the log)"
        ) from None
    finally:
        sink.execute(f"DROP TABLE {table}")  # a DELETE would keep the rows' memory in an in-memory database


_IO_MESSAGE = re.compile(r'"exception_message":"((?:[^"\\]|\\.)*)"')


def _io_error(exc: duckdb.Error) -> str:
    """DuckDB's I/O error in a few words: the operating system's message where DuckDB quotes one."""
    found = _IO_MESSAGE.search(str(exc))
    return found.group(1).replace('\\"', '"') if found else first_line(exc)


def _sql_path(path: str | Path) -> str:
    return Path(path).as_posix().replace("'", "''")


def _worker_context() -> Any:
    # forkserver: a clean process (no DuckDB threads, unlike this one) that imports fae once and forks each worker
    context = get_context("forkserver")
    context.set_forkserver_preload(["fae.judge.parallel", "fae.judge.builtin_judges"])
    return context


def start_workers(workers: int | None, runs: int, *, events: int | None = None) -> None:
    """Start the process local workers fork from now, when ``runs`` runs will be judged on more than one.

    Its import of fae (~0.3-1 s) then runs beside the caller's own preparation (the log's runs and spans, the
    batch's start) instead of delaying the first worker; when the forkserver runs already, nothing happens.
    """
    if (workers or workers_default(runs, events=events)) > 1 and runs > 1:
        _worker_context()
        _start_forkserver()


SOCKET_DIR_ROOM = 64
"""The longest temp folder the forkserver's socket can live under: a socket path holds 107 bytes (103 on
macOS), and multiprocessing adds ~35 to the folder (``pymp-XXXXXXXX/listener-XXXXXXXX``)."""


def _start_forkserver() -> None:
    """Start the forkserver (nothing when it runs already); under a long TMPDIR, its socket goes to /tmp."""
    move = len(tempfile.gettempdir()) > SOCKET_DIR_ROOM and os.access("/tmp", os.W_OK)
    saved = tempfile.tempdir
    if move:
        tempfile.tempdir = "/tmp"  # only while multiprocessing makes its own temp folder (the first time)
    try:
        forkserver.ensure_running()
    except OSError as exc:
        raise JudgeError(
            f"cannot start the judging worker processes ({exc}; the temp folder is "
            f"{tempfile.gettempdir()}); a shorter TMPDIR, or --workers 1, judges without them"
        ) from None
    finally:
        tempfile.tempdir = saved


def run_shards(jobs: Sequence[ShardJob], workers: int) -> list[ShardResult]:
    """Judge the shards, in worker processes when there is more than one.

    When this process stops early (an error, a stop signal), the workers are stopped with it rather than
    left to finish shards nobody will read; a worker whose owner dies without a word (SIGKILL) stops by
    itself and removes the spool folder it wrote to (``_watch_owner``).
    """
    if workers <= 1 or len(jobs) <= 1:
        return [judge_shard(job) for job in jobs]
    # This process judges the first shard itself meanwhile: it has fae imported already, while the forkserver
    # may still be importing it (``start_workers`` starts it early) before the first worker can start.
    spools = sorted({str(Path(job.out).parent) for job in jobs[1:] if job.out})
    context = _worker_context()
    _start_forkserver()
    # Each worker gets the reading end; only this process ever holds the writing end (the forkserver was started
    # without it), so the workers read end-of-file when this process is gone, however it went (``_watch_owner``).
    lifeline, held = context.Pipe(duplex=False)
    pool = ProcessPoolExecutor(
        max_workers=min(workers, len(jobs)) - 1,
        mp_context=context,
        initializer=_watch_owner,
        initargs=(lifeline, tuple(spools)),
    )
    try:
        others = pool.map(judge_shard, jobs[1:])
        first = judge_shard(jobs[0])
        results = [first, *others]
    except BrokenProcessPool as exc:
        _stop_workers(pool)
        raise JudgeError(f"a judging worker process died ({exc}); no verdict was written") from None
    except BaseException:
        _stop_workers(pool)
        raise
    finally:
        pool.shutdown()  # the workers are gone (or stopped above) before their lifeline is let go
        held.close()
        lifeline.close()
    return results


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    """Stop the pool's workers now, mid-shard: what they judged is thrown away with the spool."""
    terminate = getattr(pool, "terminate_workers", None)  # Python 3.14
    if terminate is not None:
        terminate()
    else:
        for process in list((getattr(pool, "_processes", None) or {}).values()):
            process.terminate()
    pool.shutdown(wait=True, cancel_futures=True)


def _watch_owner(lifeline: Connection, spools: tuple[str, ...]) -> None:
    """In a worker: stop, and remove the spool folders, as soon as the process that owns the pool is gone.

    Its owner stops its workers when it can (``run_shards``); this is for when it cannot (SIGKILL, the
    OOM killer). A worker is the forkserver's child, not its owner's, so it cannot wait for its parent. It
    reads from a pipe whose other end only the owner holds, on which nothing is ever sent: the read ends when
    the owner's end is closed, which the kernel does as the owner goes. Nothing here asks about a pid, so a
    pid taken by a new process since cannot keep a worker running, on any system.
    """

    def watch() -> None:
        try:
            lifeline.recv_bytes()
        except (EOFError, OSError):
            pass
        for spool in spools:
            shutil.rmtree(spool, ignore_errors=True)
        os._exit(1)

    threading.Thread(target=watch, name="fae-owner-watch", daemon=True).start()


STALE_SPOOL_S = 600
"""How long a dead process's spool folder is left untouched before a later rejudge removes it."""


@contextmanager
def spool_folder(kind: str = "rejudge") -> Iterator[str]:
    """A temp folder for verdict files, named for this process and host (``fae-KIND-PID@HOST.XXXXXXXX``).

    A process killed outright (SIGKILL, the OOM killer) cannot remove its folder; the folders of its kind
    that a process of this host left and that no longer runs are removed here first (``remove_stale_spools``).
    """
    host = _host_name()
    remove_stale_spools(kind, host)
    with tempfile.TemporaryDirectory(prefix=f"fae-{kind}-{os.getpid()}@{host}.") as folder:
        yield folder


def remove_stale_spools(kind: str, host: str | None = None, *, older_than: float = STALE_SPOOL_S) -> list[Path]:
    """Remove the spool folders of ``kind`` in the temp folder whose process, on this host, has ended.

    Only a folder of this user, untouched for ``older_than`` seconds, named for this host (a temp folder
    may be shared by machines) and for a pid that no process has now. A pid reused since leaves its folder
    for a later run; a folder of a live process is never touched. Returns what was removed.
    """
    host = host or _host_name()
    removed = []
    now = time.time()
    prefix = f"fae-{kind}-"
    for folder in Path(tempfile.gettempdir()).glob(f"{prefix}*@{host}.*"):
        owner, _, rest = folder.name[len(prefix) :].partition("@")
        if not owner.isdigit() or rest.rpartition(".")[0] != host:
            continue
        try:
            found = folder.lstat()
        except OSError:
            continue
        mine = not hasattr(os, "getuid") or found.st_uid == os.getuid()
        if not stat.S_ISDIR(found.st_mode) or not mine or now - found.st_mtime < older_than or _alive(int(owner)):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


def _host_name() -> str:
    """This machine's name as it can stand in a file name and a glob (other characters become ``_``)."""
    return re.sub(r"[^A-Za-z0-9.-]", "_", socket.gethostname()) or "host"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def insert_verdicts(
    log: EventLog, stems: Sequence[str | Path], completes: tuple[str, datetime, int] | None = None
) -> int:
    """Append the workers' verdict files (and the findings judged beside them) to the log in one transaction;
    returns the verdict rows written.

    ``completes`` (batch, completed at, judged runs) marks that verdict batch complete in the same
    transaction, so a batch is complete exactly when its verdicts are in.
    """
    present = [_sql_path(f) for stem in stems for f in sorted(Path(stem).parent.glob(Path(stem).name + "-*.parquet"))]
    facts = [
        _sql_path(f) for stem in stems for f in sorted(Path(stem).parent.glob(Path(stem).name + ".facts-*.parquet"))
    ]
    listed = ", ".join(f"'{f}'" for f in present)
    con = log.con
    count = 0
    try:
        con.execute("BEGIN TRANSACTION")
        if present:
            con.execute(f"INSERT INTO verdicts ({_COLUMN_NAMES}) SELECT {_COLUMN_NAMES} FROM read_parquet([{listed}])")
            (count,) = con.execute(f"SELECT count(*) FROM read_parquet([{listed}])").fetchall()[0]
        if facts:  # one row per (run, judge, inputs, code version): findings already kept are not added again
            con.execute(
                "INSERT INTO judge_facts SELECT * FROM read_parquet([" + ", ".join(f"'{f}'" for f in facts) + "]) n"
                " WHERE NOT EXISTS (SELECT 1 FROM judge_facts j WHERE j.run_id = n.run_id AND j.judge = n.judge"
                " AND j.inputs = n.inputs AND j.code_version = n.code_version)"
            )
        if completes is not None:
            batch, completed_at, judged = completes
            con.execute(
                "UPDATE verdict_batches SET completed_at = ?, judged_runs = ? WHERE batch = ?",
                [completed_at, judged, batch],
            )
        con.execute("COMMIT")
    except duckdb.Error as exc:
        try:
            con.execute("ROLLBACK")
        except duckdb.Error:
            pass
        raise StoreError(f"cannot write verdicts to log {log.path}: {exc}") from None
    return int(count)
