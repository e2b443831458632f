"""Rejudge throughput: runs per second over a log of at least 10,000 recorded runs.

Records every task's gold run (variations 0-1) through the real stack, then
copies those runs under new ids until the log holds ``--runs`` runs (copies
share seed bodies, as repeats of a variation do). Times ``fae rejudge`` of the
deterministic judges (task strict and light, failure_mode, state_drift) on
one core, and prints runs/s, the log's size, and where the time goes.

    uv run python bench/bench_rejudge.py [--runs 10000] [--keep PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import pstats
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import anyio
import duckdb

from fae.harness.suite_runner import plan_suite, record_suite
from fae.judge.rejudge import build_plan, judge_run, rejudge, relaxed_gc
from fae.replay.source import BodyCache, load_runs, run_ids
from fae.store.log import EventLog
from fae.tasks import load_suite

JUDGES = [("task", {"mode": "strict"}), ("task", {"mode": "light"}), ("failure_mode", {}), ("state_drift", {})]


def build_log(path: Path, runs: int) -> int:
    specs = plan_suite(list(load_suite()), [0, 1], ["gold"], 1, "bench")
    anyio.run(lambda: record_suite(path, specs, concurrency=8))
    con = duckdb.connect(str(path))
    base = con.execute("SELECT count(*) FROM runs").fetchone()[0]
    copies = -(-runs // base) - 1
    for n in range(1, copies + 1):
        con.execute("INSERT INTO runs SELECT run_id || '.c' || ?, suite, task_id, variation, agent, agent_config,"
                    " repeat + ?, status, started_at, ended_at, stop_reason, error FROM runs WHERE repeat = 0",
                    [n, n])
        con.execute("INSERT INTO events SELECT e.run_id || '.c' || ?, seq, kind, wall_time, mono_ns, actor, upstream,"
                    " payload FROM events e JOIN runs r ON r.run_id = e.run_id AND r.repeat = 0", [n])
    con.execute("DELETE FROM verdicts")
    con.execute("CHECKPOINT")
    total = con.execute("SELECT count(*) FROM runs").fetchone()[0]
    con.close()
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--keep", type=Path, help="build (or reuse) the log here")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="fae-bench-"))
    path = args.keep or folder / "bench.duckdb"
    if not path.exists():
        t0 = time.perf_counter()
        total = build_log(path, args.runs)
        print(f"built log: {total} runs in {time.perf_counter() - t0:.1f} s")
    with EventLog(path, read_only=True) as log:
        _, [(total, events)] = log.query("SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM events)")
    size = path.stat().st_size
    print(f"log: {total} runs, {events} events, {size / 2**20:.1f} MiB ({size / total / 1024:.1f} KiB per run)")

    # load only: how fast the log reads back
    with EventLog(path, read_only=True) as log:
        ids = run_ids(log)
        t0 = time.perf_counter()
        loaded = sum(1 for _ in load_runs(log, ids, bodies=BodyCache(log), lean=True))
        load_s = time.perf_counter() - t0
    print(f"load only:            {loaded / load_s:8.0f} runs/s")

    plan = [j for name, rules in JUDGES for j in build_plan(name, rules)]
    now = datetime.now(UTC)
    def judge_all(gc_mode) -> tuple[float, int]:
        with EventLog(path, read_only=True) as log:
            start = time.perf_counter()
            count = 0
            with gc_mode():
                for run in load_runs(log, ids, bodies=BodyCache(log), lean=True):
                    count += len(judge_run(run, plan, judged_at=now))
            return time.perf_counter() - start, count

    profiler = cProfile.Profile() if args.profile else None
    if profiler:
        profiler.enable()
    # side by side: the collector's default thresholds, then what `fae rejudge` uses
    default_s, _ = judge_all(contextlib.nullcontext)
    judge_s, verdicts = judge_all(relaxed_gc)
    if profiler:
        profiler.disable()
    print(f"load + judge (4 judges, in memory): {total / judge_s:8.0f} runs/s, {verdicts / judge_s:8.0f} verdicts/s"
          f"   (default gc thresholds: {total / default_s:.0f} runs/s; relaxed/default {default_s / judge_s:.2f}x)")
    if profiler:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)

    t0 = time.perf_counter()
    for name, rules in JUDGES:
        rejudge(path, judge_name=name, overrides=rules)
    full_s = time.perf_counter() - t0
    print(f"fae rejudge, 4 judges one at a time, verdicts written: {4 * total / full_s:8.0f} run-judgements/s "
          f"({full_s:.1f} s for {4 * total} verdicts)")
    t0 = time.perf_counter()
    rejudge(path, judge_name="failure_mode")
    fm_s = time.perf_counter() - t0
    print(f"fae rejudge --judge failure_mode: {total / fm_s:8.0f} runs/s")
    print(f"one process, one core; log {size / 2**20:.1f} MiB for {total} runs")


if __name__ == "__main__":
    main()
