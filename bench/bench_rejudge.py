"""Rejudge throughput and memory on realistic logs of growing size, old and new loading side by side.

Records the gold suite (every task, variations 0-2: 147 runs) through the real
stack once, then grows copies of it to each size with bench/grow_log.py: every
copy has its own bodies (new sandbox ids, exchange ids, server timestamps), only
the seed bundles are shared, as with repeats in a real log (``--shared-bodies``
gives the old, easier log; past 10,000 runs the log grows by SQL copies of its
first 10,000 runs, each body under a new hash of its own). For each size it
runs, each in a fresh process so peak RSS is its own:

  chunked   the loader before this change: a chunk of runs by id, bodies by hash, one process
  stream/1  ``fae rejudge --workers 1``: one pass in written order, bodies by position
  stream/N  ``fae rejudge --workers N`` for each N in --workers
  onerule-full  ``fae rejudge --rule accept_corrections=false --full --workers 1`` on a log that holds the default
                plan's verdicts (as a recorded log holds its live ones): all six judges again
  onerule-events  the same without ``--full``, with ``--from-events``: the verdicts that would come out the same
            stand; ensure_record alone is judged, each run read from its events
  onerule   the same as users run it (the command users run most): ensure_record decides from the findings the log
            keeps (fae/judge/facts.py; the prejudged copy's full rejudge kept them, as live judging does)

All judge the default plan (6 judges) and write the verdicts. Prints runs/s,
runs/s per worker, runs per CPU-second of the whole process (interpreter start and imports included) and of
the rejudge call alone, peak RSS (with N workers this process
judges the first shard and N-1 worker processes the rest), and the log's bytes
per run and per event, as grown and with the first mode's verdict batch in
it (a recorded log holds its live verdicts; the grown copies hold none). Each
mode judges a fresh copy of the kept log, so repeated runs of this script
measure the same log, not one that gathers a verdict batch per mode and run.
The machine may be shared: compare the ratios within one run, not across runs.

    uv run python bench/bench_rejudge.py [--sizes 2000,10000] [--workers 2] [--keep DIR] [--modes M,M]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime
from multiprocessing import get_context
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.grow_log import grow
from fae.harness.config import RecordConfig
from fae.judge.judging import judge_run, judges_to_run, relaxed_gc
from fae.judge.parallel import peak_rss_mib
from fae.judge.rejudge import JUDGED_STATUSES, rejudge
from fae.replay.source import BodyCache, load_runs, run_ids
from fae.store.bodies import bodies_dir
from fae.store.log import Batch, EventLog
from fae.tasks import load_suite


def record_base(path: Path) -> None:
    import anyio  # the recording stack: imported here, so a measured rejudge process imports what `fae rejudge` does

    from fae.harness.suite_runner import record_suite
    from fae.harness.worklist import suite_specs

    specs = suite_specs(list(load_suite()), [0, 1, 2], ["gold"], 1, "bench")
    anyio.run(lambda: record_suite(path, specs, RecordConfig(concurrency=8)))


def chunked(path: Path) -> int:
    """The loading ``fae rejudge`` had before: chunks of runs by id, bodies by hash (kept here to compare)."""
    plan = judges_to_run()
    now = datetime.now(UTC)
    with EventLog(path) as log:
        ids = run_ids(log, statuses=JUDGED_STATUSES)
        pending = []
        with relaxed_gc():
            for run in load_runs(log, ids, bodies=BodyCache(log), lean=True, chunk=400):
                pending.extend(judge_run(run, plan, judged_at=now, batch="bench-chunked"))
                if len(pending) >= 500 * len(plan):
                    log.write_batch(Batch(verdicts=pending))
                    pending = []
        if pending:
            log.write_batch(Batch(verdicts=pending))
    return len(ids)


def one(mode: str, path: Path) -> None:
    """Run one mode in this process and print what it cost as JSON."""
    start = time.perf_counter()
    began = time.monotonic()
    called = time.process_time()
    call_cpu = None
    workers = []
    spans: list[tuple[float, float, float]] = []
    if mode == "chunked":
        runs = chunked(path)
    elif mode.startswith("onerule"):
        called = time.process_time()
        result = rejudge(
            path,
            overrides={"accept_corrections": False},
            workers=1,
            full=mode == "onerule-full",
            from_events=mode != "onerule",
        )
        call_cpu = time.process_time() - called
        runs = result.considered
        if mode == "onerule" and result.from_facts != result.runs:
            raise SystemExit(f"onerule read {result.runs - result.from_facts} runs: the log keeps no findings of them")
    else:
        result = rejudge(path, workers=int(mode.split("/")[1]), full=True)
        runs = result.runs
        spans = [(s.began - began, s.ended - began, s.cpu_s) for s in result.shards]
        if len(result.shards) > 1:  # shards after the first are judged in worker processes, which report their own
            workers = result.shards[1:]  # CPU time and memory; this process judges the first
    seconds = time.perf_counter() - start
    own = resource.getrusage(resource.RUSAGE_SELF)
    cpu = own.ru_utime + own.ru_stime + sum(w.cpu_s for w in workers)
    if call_cpu is None:
        call_cpu = time.process_time() - called
    call_cpu += sum(w.cpu_s for w in workers)
    print(
        json.dumps(
            {
                "runs": runs,
                "seconds": seconds,
                "cpu_s": cpu,
                "call_cpu_s": call_cpu,
                "rss_mib": peak_rss_mib(),
                "worker_rss_mib": max((w.rss_mib for w in workers), default=0),
                "spans": spans,
            }
        )
    )


def measure(mode: str, path: Path) -> dict:
    done = subprocess.run([sys.executable, __file__, "--one", mode, "--log", str(path)], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{mode} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


_BARRIER = None


def _hold(barrier) -> None:
    global _BARRIER
    _BARRIER = barrier


def _burn(n: int) -> tuple[float, float]:
    if _BARRIER is not None:
        _BARRIER.wait()  # both processes started: the work begins together
    start = time.monotonic()
    total = 0
    for i in range(n):
        total += i * i
    return start, time.monotonic()


def cpu_control(n: int = 5_000_000) -> tuple[float, float]:
    """Seconds for two pieces of pure-Python work one after the other, then at once on two processes."""
    start = time.monotonic()
    _burn(n)
    _burn(n)
    serial = time.monotonic() - start
    context = get_context("spawn")
    with ProcessPoolExecutor(2, mp_context=context, initializer=_hold, initargs=(context.Barrier(2),)) as pool:
        spans = list(pool.map(_burn, [n, n]))
    return serial, max(end for _, end in spans) - min(begin for begin, _ in spans)


def log_size(path: Path) -> str:
    """Bytes per run and per event: the blocks in use (a migrated file keeps its freed blocks for reuse)."""
    with EventLog(path) as log:  # opened for writing once: brings an older log to the current schema
        _, [(runs, events)] = log.query("SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM events)")
        log.con.execute("CHECKPOINT")
        _, [(used,)] = log.query("SELECT used_blocks * block_size FROM pragma_database_size()")
    return (
        f"{runs} runs, {events} events, {used / 2**20:.0f} MiB in use: {used / runs / 1024:.1f} KiB per run, "
        f"{used / events:.0f} B per event (Inspect's .eval: 7.3 KiB per sample)"
    )


def judged_copy(path: Path, folder: Path) -> Path:
    """A fresh copy of the log (and its side-file bodies) for one mode to judge and write verdicts into."""
    copy = folder / f"judging-{path.name}"
    shutil.copy(path, copy)
    if bodies_dir(path).is_dir():
        shutil.copytree(bodies_dir(path), bodies_dir(copy), dirs_exist_ok=True)
    return copy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="2000", help="comma-separated run counts (e.g. 2000,10000,50000,100000)")
    parser.add_argument("--workers", default="2", help="comma-separated worker counts for the streaming path")
    parser.add_argument("--keep", type=Path, help="build (or reuse) the logs in this directory")
    parser.add_argument("--shared-bodies", action="store_true", help="copies share every body (the easy log)")
    parser.add_argument("--skip-chunked", action="store_true", help="leave out the old loader (slow at 50k+)")
    parser.add_argument("--skip-onerule", action="store_true", help="leave out the one-rule rejudges")
    parser.add_argument("--modes", help="only these modes, comma-separated (e.g. onerule-events,onerule)")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--log", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        one(args.one, args.log)
        return
    folder = args.keep or Path(tempfile.mkdtemp(prefix="fae-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    base = folder / "base.duckdb"
    if not base.exists():
        start = time.perf_counter()
        record_base(base)
        print(f"recorded the gold suite in {time.perf_counter() - start:.0f} s: {log_size(base)}")
    modes = (
        ([] if args.skip_chunked else ["chunked"])
        + ["stream/1"]
        + [f"stream/{n}" for n in args.workers.split(",") if int(n) > 1]
        + ([] if args.skip_onerule else ["onerule-full", "onerule-events", "onerule"])
    )
    if args.modes:
        modes = [mode for mode in modes if mode in args.modes.split(",")]
    kind = "shared" if args.shared_bodies else "own"
    serial, parallel = cpu_control()
    print(
        f"control: pure-Python work on 2 processes runs {serial / parallel:.2f}x as fast as on 1 here and now "
        f"(the most any 2-worker ratio below can reach on this machine at this moment)"
    )
    for size in (int(s) for s in args.sizes.split(",")):
        path = folder / f"grown-{size}-{kind}.duckdb"
        if not path.exists():
            start = time.perf_counter()
            shutil.copy(base, path)
            grow(str(path), size, shared_bodies=args.shared_bodies)
            print(f"grew {path.name} in {time.perf_counter() - start:.0f} s")
        print(f"\n== {size} runs ({kind} bodies): {log_size(path)}")
        results = {}
        prejudged = folder / f"prejudged-{path.name}"
        if any(m.startswith("onerule") for m in modes) and not prejudged.exists():
            shutil.copy(path, prejudged)  # the default plan's verdicts in, as a recorded log's live ones are
            if bodies_dir(path).is_dir():
                shutil.copytree(bodies_dir(path), bodies_dir(prejudged), dirs_exist_ok=True)
            rejudge(prejudged, full=True)
        for mode in modes:
            # every mode judges the same log; the kept one gathers no batches
            judged = judged_copy(prejudged if mode.startswith("onerule") else path, folder)
            try:
                found = results[mode] = measure(mode, judged)
                if mode == modes[0]:  # a recorded log holds its live verdicts: one batch, as this copy now does
                    print(f"  with one batch of verdicts: {log_size(judged)}")
            finally:
                shutil.rmtree(bodies_dir(judged), ignore_errors=True)
                for leftover in (judged, judged.with_name(judged.name + ".wal")):
                    leftover.unlink(missing_ok=True)
            workers = int(mode.split("/")[1]) if mode.startswith("stream/") else 1
            rate = found["runs"] / found["seconds"]
            print(
                f"  {mode:9} {rate:7.0f} runs/s  {rate / workers:7.0f} runs/s per worker  "
                f"{found['runs'] / found['cpu_s']:6.0f} runs per CPU-second "
                f"({found['runs'] / found['call_cpu_s']:6.0f} in the call)  "
                f"{found['seconds']:6.1f} s  peak RSS {found['rss_mib']:6.0f} MiB"
                + (f" (each worker {found['worker_rss_mib']:.0f} MiB)" if workers > 1 else "")
            )
            if found["spans"]:  # when each shard ran, from the measured process's start: a late one is start-up cost
                print(
                    "            shards (began-ended s, CPU s): "
                    + ", ".join(f"{b:.1f}-{e:.1f} ({c:.1f})" for b, e, c in found["spans"])
                    + f"; whole {found['seconds']:.1f} s"
                )
        if "chunked" in results and "stream/1" in results:
            print(f"  stream/1 vs chunked: {results['chunked']['seconds'] / results['stream/1']['seconds']:.2f}x")
        for mode in modes:
            if mode.startswith("stream/") and mode != "stream/1" and "stream/1" in results:
                print(f"  {mode} vs stream/1: {results['stream/1']['seconds'] / results[mode]['seconds']:.2f}x wall")
                print(f"  {mode} vs stream/1: {results[mode]['cpu_s'] / results['stream/1']['cpu_s']:.2f}x CPU")
        if "onerule" in results:
            for other in (m for m in ("onerule-full", "onerule-events") if m in results):
                print(
                    f"  onerule vs {other}: {results[other]['cpu_s'] / results['onerule']['cpu_s']:.2f}x less CPU "
                    f"({results[other]['call_cpu_s'] / results['onerule']['call_cpu_s']:.2f}x in the call) for the "
                    "same latest verdicts"
                )
    print(f"\nlogs in {folder}; 6 judges, verdicts written; one run of this script is one set of side-by-side numbers")


if __name__ == "__main__":
    main()
