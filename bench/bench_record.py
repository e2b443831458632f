"""Where `fae record` spends its one core: the gold suite recorded under cProfile, self time grouped by part.

Records every task's gold run (variations 0-2: 147 runs, 8 at a time) through
the real stack in one process, as ``fae record`` does, and prints the wall
time and each part's share of the CPU time (a function's own time, grouped by
the package it lives in): the proxy (mitmproxy and fae.proxy), the FHIR
engine, the MCP servers and client, the agents, the log (DuckDB, journal,
writer), live judging, the HTTP servers and clients, the event loop. The
profile slows everything by a similar factor; read the shares, not the
seconds. ``--no-profile`` times the suite alone.

    uv run python bench/bench_record.py [--no-profile] [--variations 0-2]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fae.harness.suite_runner import plan_suite, record_suite
from fae.tasks import load_suite

# the first matching fragment of a function's file names its part
PARTS = (
    ("/fae/proxy/", "proxy"), ("/mitmproxy/", "proxy"), ("/mitmproxy_rs/", "proxy"), ("/fae/recorder/", "proxy"),
    ("/fae/fhir/", "FHIR engine"), ("/fhirpathpy/", "FHIR engine"),
    ("/fae/mcp/", "MCP"), ("/mcp/", "MCP"),
    ("/fae/agents/", "agents"), ("/fae/plan", "agents"),
    ("/fae/store/", "log"), ("/duckdb", "log"), ("msgspec", "log"),
    ("/fae/judge/", "live judging"), ("/fae/replay/", "live judging"), ("/fae/tasks/", "live judging"),
    ("/fae/harness/", "harness"),
    ("/starlette/", "HTTP servers"), ("/uvicorn/", "HTTP servers"), ("/h11/", "HTTP servers"),
    ("/httpx/", "HTTP clients"), ("/httpcore/", "HTTP clients"),
    ("/pydantic", "validation (pydantic)"),
    ("/asyncio/", "event loop"), ("/anyio/", "event loop"), ("selectors", "event loop"), ("/ssl", "event loop"),
    ("/json/", "JSON (stdlib)"),
)


def part_of(filename: str) -> str:
    for fragment, part in PARTS:
        if fragment in filename:
            return part
    return "other" if filename.startswith("/") else "builtins (C)"


def record(variations: list[int]) -> tuple[int, float]:
    specs = plan_suite(list(load_suite()), variations, ["gold"], 1, "bench")
    log = Path(tempfile.mkdtemp(prefix="fae-bench-record-")) / "suite.duckdb"
    start = time.perf_counter()
    result = anyio.run(lambda: record_suite(log, specs, concurrency=8))
    seconds = time.perf_counter() - start
    return sum(result.statuses.values()), seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--variations", default="0-2")
    args = parser.parse_args()
    low, _, high = args.variations.partition("-")
    variations = list(range(int(low), int(high or low) + 1))
    if args.no_profile:
        runs, seconds = record(variations)
        print(f"{runs} runs in {seconds:.1f} s ({runs / seconds:.1f} runs/s), one process")
        return
    profiler = cProfile.Profile(time.process_time)  # CPU time: waiting in select() is not work
    profiler.enable()
    runs, seconds = record(variations)
    profiler.disable()
    shares: Counter = Counter()
    others: Counter = Counter()
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    for (filename, _, name), (_, _, own, _, callers) in stats.items():
        part = part_of(filename)
        if part == "builtins (C)" and callers:  # a C function counts for the part that called it most
            caller = max(callers.items(), key=lambda item: item[1][2])[0]
            part = part_of(caller[0])
        shares[part] += own
        if part in ("other", "builtins (C)"):
            others[f"{filename}:{name}"] += own
    total = sum(shares.values())
    print(f"{runs} runs in {seconds:.1f} s under the profiler; CPU time by part (own time of its functions):")
    for part, own in shares.most_common():
        print(f"  {part:24} {own:7.1f} s  {100 * own / total:5.1f} %")
    print("largest unattributed:", "; ".join(f"{name} {own:.1f} s" for name, own in others.most_common(6)))


if __name__ == "__main__":
    main()
