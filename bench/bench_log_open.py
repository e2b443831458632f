"""What opening a log costs, and what of it is the sandbox and the catalogue check, side by side in one run.

    uv run python bench/bench_log_open.py [--runs 200] [--opens 40]

Writes a log of --runs finished runs, then times (median of 5 rounds, CPU time, so a loaded machine does not
skew it) a bare ``duckdb.connect`` + close, ``connect_log`` (connect and lock down), the catalogue check's two
parts (the table, view, macro and type listing; the columns and views compared), and whole ``EventLog`` opens,
read-only and for writing (a writer also recreates the views). The check's expected catalogue is built once
per process; its cost is printed on its own.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "store"))

from logs import finished_run, write_log

from fae.store import shape
from fae.store.log import EventLog
from fae.store.opening import connect_log


def _ms(action: Callable[[], object], opens: int) -> float:
    rounds = []
    for _ in range(5):
        start = time.process_time()
        for _ in range(opens):
            action()
        rounds.append((time.process_time() - start) / opens * 1000)
    return statistics.median(rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--opens", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bench.duckdb"
        write_log(path, *(finished_run(f"r{n:05d}") for n in range(args.runs)))
        start = time.process_time()
        shape.expected()
        shape.expected(True)
        built = (time.process_time() - start) * 1000
        rows = {"duckdb.connect + close": _ms(lambda: duckdb.connect(str(path), read_only=True).close(), args.opens)}
        held = connect_log(path, read_only=True)  # the listings are timed on one open connection
        (database,) = held.execute("SELECT current_database()").fetchall()[0]
        rows |= {
            "listing (tables, views, macros, types)": _ms(lambda: shape.check_kinds(held, path, database), args.opens),
            "columns, constraints, views compared": _ms(
                lambda: shape.check_shape(held, path, database, views=True), args.opens
            ),
        }
        held.close()
        rows["connect_log (connect, lock down) + close"] = _ms(
            lambda: connect_log(path, read_only=True).close(), args.opens
        )
        rows["EventLog read-only + close"] = _ms(lambda: EventLog(path, read_only=True).close(), args.opens)
        rows["EventLog for writing + close"] = _ms(lambda: EventLog(path).close(), args.opens)
    base = rows["duckdb.connect + close"]
    print(f"expected catalogue, built once per process: {built:.1f} ms CPU")
    print(f"{'per open (CPU)':44} {'ms':>7} {'x bare':>7}")
    for label, ms in rows.items():
        print(f"{label:44} {ms:7.2f} {ms / base:7.2f}")


if __name__ == "__main__":
    main()
