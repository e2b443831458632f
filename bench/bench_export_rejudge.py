"""Rejudging a log against rejudging its Parquet export, side by side, each in a fresh process, taking turns.

Copies LOG (so the verdicts written do not grow it between rounds), exports the copy with
``fae export --parquet``, then for each round runs ``rejudge --workers N`` on the copy and on the
export (``--parquet``), each in a fresh Python process, and prints wall seconds, CPU seconds, runs per
CPU-second, peak RSS and the export reader's body counts. Both write their verdicts (into the log, into
the export). The machine may be shared: compare the ratios within one run, not across runs.

    uv run python bench/bench_export_rejudge.py LOG [--workers 1] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def one(mode: str, path: Path, workers: int) -> None:
    """Judge in this process (a fresh one) and print what it cost as one JSON line."""
    from fae import api
    from fae.judge.parallel import peak_rss_mib

    started, cpu = time.perf_counter(), time.process_time()
    result = api.rejudge(
        None if mode == "export" else path, parquet=path if mode == "export" else None, workers=workers
    )
    children = os.times()
    print(
        json.dumps(
            {
                "mode": mode,
                "runs": result.runs,
                "verdicts": result.verdicts,
                "wall_s": time.perf_counter() - started,
                "cpu_s": time.process_time() - cpu + children.children_user + children.children_system,
                "rss_mib": max([peak_rss_mib()] + [s.rss_mib for s in result.shards]),
                "cached": sum(s.stats.cached for s in result.shards),
                "by_position": sum(s.stats.by_position for s in result.shards),
                "by_hash": sum(s.stats.by_hash for s in result.shards),
            }
        )
    )


def measure(mode: str, path: Path, workers: int) -> dict:
    done = subprocess.run(
        [sys.executable, __file__, "--one", mode, str(path), "--workers", str(workers)], capture_output=True, text=True
    )
    if done.returncode:
        raise SystemExit(f"{mode} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        one(args.one, args.log, args.workers)
        return
    from fae.store.export import export_parquet

    with tempfile.TemporaryDirectory(prefix="fae-bench-export-") as scratch:
        log, directory = Path(scratch) / "log.duckdb", Path(scratch) / "export"
        shutil.copy(args.log, log)
        started = time.perf_counter()
        export_parquet(log, directory)
        size = sum(f.stat().st_size for f in directory.rglob("*") if f.is_file())
        print(f"export: {time.perf_counter() - started:.1f} s, {size / 2**20:.1f} MiB; load {os.getloadavg()[0]:.1f}")
        for round_ in range(args.rounds):
            for mode, path in (("log", log), ("export", directory)):
                row = measure(mode, path, args.workers)
                print(
                    f"round {round_ + 1} {mode:>6}: {row['runs']} runs, {row['wall_s']:.1f} s wall, "
                    f"{row['cpu_s']:.1f} CPU-s, {row['runs'] / row['cpu_s']:.0f} runs per CPU-s, "
                    f"peak RSS {row['rss_mib']:.0f} MiB, bodies cached {row['cached']} / by position "
                    f"{row['by_position']} / by hash {row['by_hash']};"
                    f" load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
