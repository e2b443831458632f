"""`fae view` over logs of 10,000 and 100,000 runs: the served report's size and time, and a run page's and a
cell's runs page's, each built when asked; and what one file holding every run page would weigh.

The log is bench_stats's (4 experiments × 5 configurations × every suite task × variations × 3 trials, each
run with its LLM calls, tool calls, FHIR exchanges, answer and verdicts). The report page is computed once
when `fae view` starts (the study, the figures, the configuration × task grid); a run page and a runs page
are built per request from the log. Times are wall seconds in this process, on a shared machine.

    uv run python bench/bench_view.py [--runs 10000 100000] [--keep DIR] [--sample 20]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

from bench.bench_stats import build_log
from fae.report.commands import report_page
from fae.report.explorer.server import Explorer
from fae.store.live import LogReader


def measure(log: Path, sample: int) -> dict[str, float]:
    started = time.perf_counter()
    index = report_page(log)
    index_s = time.perf_counter() - started
    reader = LogReader(log)
    explorer = Explorer(reader, index, log.name)
    run_ids = [row[0] for row in reader.query("SELECT run_id FROM runs ORDER BY run_id")[1]]
    chosen = random.Random(3).sample(run_ids, min(sample, len(run_ids)))
    run_times, run_sizes = [], []
    for run_id in chosen:
        started = time.perf_counter()
        status, page = explorer.answer("/run/" + quote(run_id, safe=""))
        run_times.append(time.perf_counter() - started)
        run_sizes.append(len(page.encode()))
        assert status == 200, page[:300]
    configuration, task = reader.query("SELECT configuration, task_id FROM run_results LIMIT 1")[1][0]
    started = time.perf_counter()
    _, cell = explorer.answer(f"/runs?configuration={quote(configuration)}&task_id={quote(task)}")
    cell_s = time.perf_counter() - started
    started = time.perf_counter()
    _, every = explorer.answer("/runs")
    every_s = time.perf_counter() - started
    reader.close()
    mean_run = sum(run_sizes) / len(run_sizes)
    return {
        "runs": len(run_ids),
        "index_bytes": len(index.encode()),
        "index_s": index_s,
        "run_page_bytes": mean_run,
        "run_page_s_median": sorted(run_times)[len(run_times) // 2],
        "run_page_s_max": max(run_times),
        "cell_page_bytes": len(cell.encode()),
        "cell_page_s": cell_s,
        "all_runs_page_bytes": len(every.encode()),
        "all_runs_page_s": every_s,
        "one_file_bytes": len(index.encode()) + mean_run * len(run_ids),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--keep", type=Path, help="Build (or reuse) the logs in this directory.")
    parser.add_argument("--sample", type=int, default=20, help="Run pages to build per log.")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="bench-view-"))
    folder.mkdir(parents=True, exist_ok=True)
    for runs in args.runs:
        log = folder / f"view-{runs}.duckdb"
        if not log.exists():
            started = time.perf_counter()
            made = build_log(log, runs)
            print(f"built {log} with {made} runs in {time.perf_counter() - started:.0f} s", flush=True)
        found = measure(log, args.sample)
        print(
            f"{found['runs']:>7} runs: report page {found['index_bytes'] / 1e6:.2f} MB in {found['index_s']:.1f} s;"
            f" run page {found['run_page_bytes'] / 1e3:.1f} kB, median {found['run_page_s_median'] * 1000:.0f} ms"
            f" (max {found['run_page_s_max'] * 1000:.0f} ms); a cell's runs {found['cell_page_bytes'] / 1e3:.1f} kB"
            f" in {found['cell_page_s'] * 1000:.0f} ms; every run, first page {found['all_runs_page_bytes'] / 1e3:.0f}"
            f" kB in {found['all_runs_page_s'] * 1000:.0f} ms; one file with every run page would be"
            f" {found['one_file_bytes'] / 1e9:.2f} GB",
            flush=True,
        )


if __name__ == "__main__":
    main()
