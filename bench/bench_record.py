"""Where `fae record` spends its cores: the gold suite in one process, two, and two workers, side by side.

Records every task's gold run (variations 0-2: 147 runs, 16 at a time) through
the real stack, as ``fae record`` does. ``--side-by-side`` (the default)
records it with ``processes=1`` (everything in one process), ``processes=2``
(FHIR and MCP servers in a child process) and ``workers=2`` (two worker
processes, each a full stack on its own shard, merged at the end), each in a
fresh Python process, alternating, and prints wall time, CPU time (this
process and its children, user + sys), runs/s and runs per CPU-second, with
the load average before and after each: timings on a shared machine are
noisy, read the ratios.
``--stages`` records once under py-spy (every process and thread: the
driver, the workers, the ``--processes 2`` child; on CPU only) and prints the
CPU seconds of each stage per process (``bench/record_stages.py`` says how a
sample is charged), the proxy's share, how many runs passed every judge, and
the wall seconds the runs spent from their answer to their state capture
(the settle wait and the capture). py-spy is not a dependency of fae:
``uv pip install py-spy`` first.
``--profile`` records once under cProfile (the child too) and prints each
part's share of the CPU time per process (a function's own time, grouped by
the package it lives in: the proxy (mitmproxy, fae.proxy, fae.recorder), the
FHIR engine, MCP, agents, the log, live judging, HTTP servers and clients,
the event loop) and the proxy's share of the whole. cProfile sees only each
process's main thread (FHIR engine calls and live judging run in worker
threads) and slows everything: read the shares, not the seconds.

    uv run python bench/bench_record.py [--side-by-side | --stages | --profile] [--processes 1|2]
        [--variations 0-2] [--concurrency 16] [--rounds 1] [--modes p1,p2,w2]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from record_stages import read_samples, table

from fae.harness.config import Execution, RecordConfig, StackConfig
from fae.harness.recording import record as record_suite_planned
from fae.harness.suite_runner import record_suite
from fae.harness.worklist import suite_specs
from fae.store.log import EventLog
from fae.tasks import load_suite

# the first matching fragment of a function's file names its part
PARTS = (
    ("/fae/proxy/", "proxy"),
    ("/mitmproxy/", "proxy"),
    ("/mitmproxy_rs/", "proxy"),
    ("/fae/recorder/", "proxy"),
    ("/fae/fhir/", "FHIR engine"),
    ("/fhirpathpy/", "FHIR engine"),
    ("/fae/mcp/", "MCP"),
    ("/mcp/", "MCP"),
    ("/fae/agents/", "agents"),
    ("/fae/plan", "agents"),
    ("/fae/store/", "log"),
    ("/duckdb", "log"),
    ("msgspec", "log"),
    ("/fae/judge/", "live judging"),
    ("/fae/replay/", "live judging"),
    ("/fae/tasks/", "live judging"),
    ("/fae/harness/", "harness"),
    ("/starlette/", "HTTP servers"),
    ("/uvicorn/", "HTTP servers"),
    ("/h11/", "HTTP servers"),
    ("/httpx/", "HTTP clients"),
    ("/httpcore/", "HTTP clients"),
    ("/pydantic", "validation (pydantic)"),
    ("/asyncio/", "event loop"),
    ("/anyio/", "event loop"),
    ("selectors", "event loop"),
    ("/ssl", "event loop"),
    ("/json/", "JSON (stdlib)"),
)


def part_of(filename: str) -> str:
    for fragment, part in PARTS:
        if fragment in filename:
            return part
    return "other" if filename.startswith("/") else "builtins (C)"


def _cpu_s() -> tuple[float, float]:
    """(this process, its waited-for children) user + sys CPU seconds so far."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


MODES = {"p1": "1 process", "p2": "--processes 2", "w2": "--workers 2"}


def record(variations: list[int], concurrency: int, mode: str) -> dict:
    """Record the gold suite once; wall and CPU seconds of the recording (start, stop and merge included)."""
    specs = suite_specs(list(load_suite()), variations, ["gold"], 1, "bench")
    log = Path(tempfile.mkdtemp(prefix="fae-bench-record-")) / "suite.duckdb"
    own_before, child_before = _cpu_s()
    start = time.perf_counter()
    if mode == "w2":
        config = RecordConfig(stack=StackConfig(processes=1), execution=Execution(workers=2), concurrency=concurrency)
        result = record_suite_planned(log, specs, config)
    else:
        result = anyio.run(
            lambda: record_suite(
                log, specs, RecordConfig(stack=StackConfig(processes=2 if mode == "p2" else 1), concurrency=concurrency)
            )
        )
    seconds = time.perf_counter() - start
    own_after, child_after = _cpu_s()
    return {
        "mode": mode,
        "runs": len(specs),
        "finished": result.statuses["finished"],
        "wall_s": seconds,
        "cpu_main_s": own_after - own_before,
        "cpu_child_s": child_after - child_before,
        "log": str(log),
        "cpu_process_s": sum(_cpu_s()),
    }


def log_facts(log: Path) -> dict:
    """How many runs passed every live verdict (none failed, none in error), and their mean wall seconds
    from answer to state capture."""
    with EventLog(log, read_only=True) as events:
        _, rows = events.query(
            "SELECT count(*) FILTER (WHERE ok), avg(settle) FROM ("
            " SELECT r.run_id, bool_and(v.passed IS NOT FALSE AND v.outcome <> 'error') AS ok"
            " FROM runs r JOIN verdicts v USING (run_id)"
            " GROUP BY r.run_id) JOIN ("
            " SELECT run_id, epoch(max(wall_time) FILTER (WHERE kind = 'StateCaptured')"
            "  - max(wall_time) FILTER (WHERE kind = 'AnswerGiven')) AS settle FROM events GROUP BY run_id)"
            " USING (run_id)"
        )
    return {"passed_all": rows[0][0], "answer_to_capture_s": rows[0][1]}


def _load() -> str:
    return Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?"


def side_by_side(args: argparse.Namespace) -> None:
    modes = args.modes.split(",")
    rows = []
    for round_no in range(args.rounds):
        for mode in modes:
            before = _load()
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--one",
                    "--mode",
                    mode,
                    "--variations",
                    args.variations,
                    "--concurrency",
                    str(args.concurrency),
                ],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            row = json.loads(out.strip().splitlines()[-1]) | {"round": round_no, "load": f"{before} / {_load()}"}
            rows.append(row)
            cpu = row["cpu_main_s"] + row["cpu_child_s"]
            print(
                f"round {round_no} {MODES[mode]:14}: {row['finished']}/{row['runs']} finished, "
                f"wall {row['wall_s']:.1f} s, CPU {cpu:.1f} s (main {row['cpu_main_s']:.1f} + children "
                f"{row['cpu_child_s']:.1f}), {row['runs'] / row['wall_s']:.2f} runs/s, "
                f"{row['runs'] / cpu:.2f} runs/CPU-s, CPU/wall {cpu / row['wall_s']:.2f}, load {row['load']}",
                flush=True,
            )
    base = [r for r in rows if r["mode"] == modes[0]]
    for mode in modes[1:]:
        other = [r for r in rows if r["mode"] == mode]
        wall = sum(r["wall_s"] for r in base) / sum(r["wall_s"] for r in other)
        cpu = sum(r["cpu_main_s"] + r["cpu_child_s"] for r in other) / sum(
            r["cpu_main_s"] + r["cpu_child_s"] for r in base
        )
        print(f"{MODES[mode]}: {wall:.2f}x the runs/s of {MODES[modes[0]]}, {cpu:.2f}x its CPU seconds")
    print(f"load average now {Path('/proc/loadavg').read_text().strip()}")


def stages(args: argparse.Namespace) -> None:
    spy = Path(sys.executable).with_name("py-spy")
    if not spy.exists():
        sys.exit("--stages needs py-spy in this environment: uv pip install py-spy")
    samples = Path(tempfile.mkdtemp(prefix="fae-bench-stages-")) / "samples.txt"
    before = _load()
    out = subprocess.run(
        [
            str(spy),
            "record",
            "--subprocesses",
            "--threads",
            "--nonblocking",
            "--format",
            "raw",
            "--rate",
            str(args.rate),
            "--output",
            str(samples),
            "--",
            sys.executable,
            __file__,
            "--one",
            "--mode",
            args.mode,
            "--variations",
            args.variations,
            "--concurrency",
            str(args.concurrency),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    row = json.loads([line for line in out.splitlines() if line.startswith("{")][-1])  # py-spy talks too
    facts = log_facts(Path(row["log"]))
    cpu = row["cpu_main_s"] + row["cpu_child_s"]
    print(
        f"{MODES[row['mode']]}: {row['finished']}/{row['runs']} finished, {facts['passed_all']} passed every "
        f"judge; wall {row['wall_s']:.1f} s, CPU {cpu:.1f} s ({cpu / row['runs']:.3f} CPU-s per run) under "
        f"py-spy at {args.rate} Hz; answer to state capture {facts['answer_to_capture_s']:.2f} s per run; "
        f"load {before} / {_load()}"
    )
    print(
        f"CPU seconds by stage over the whole process tree, imports included ({row['cpu_process_s']:.1f} s; "
        f"py-spy's samples as shares of it):"
    )
    print("\n".join(table(read_samples(samples), row["cpu_process_s"])))


def _shares(stats: dict) -> tuple[Counter, Counter]:
    shares: Counter = Counter()
    others: Counter = Counter()
    for (filename, _, name), (_, _, own, _, callers) in stats.items():
        part = part_of(filename)
        if part == "builtins (C)" and callers:  # a C function counts for the part that called it most
            caller = max(callers.items(), key=lambda item: item[1][2])[0]
            part = part_of(caller[0])
        shares[part] += own
        if part in ("other", "builtins (C)"):
            others[f"{filename}:{name}"] += own
    return shares, others


def profile(args: argparse.Namespace) -> None:
    child_stats = Path(tempfile.mkdtemp(prefix="fae-bench-profile-")) / "child.prof"
    os.environ["FAE_UPSTREAM_PROFILE"] = str(child_stats)
    profiler = cProfile.Profile(time.process_time)  # CPU time: waiting in select() is not work
    profiler.enable()
    row = record(args.variations_list, args.concurrency, f"p{args.processes}")
    profiler.disable()
    processes = {"main": pstats.Stats(profiler).stats}  # type: ignore[attr-defined]
    if args.processes == 2:
        processes["child"] = pstats.Stats(str(child_stats)).stats  # type: ignore[attr-defined]
    print(
        f"{row['finished']}/{row['runs']} runs finished in {row['wall_s']:.1f} s under the profiler, "
        f"processes={args.processes}; CPU {row['cpu_main_s']:.1f} s main + {row['cpu_child_s']:.1f} s child"
    )
    total_all = 0.0
    proxy = 0.0
    for name, stats in processes.items():
        shares, others = _shares(stats)
        total = sum(shares.values())
        total_all += total
        proxy += shares["proxy"]
        print(f"{name} process, CPU time by part (own time of its functions, main thread):")
        for part, own in shares.most_common():
            print(f"  {part:24} {own:7.1f} s  {100 * own / total:5.1f} %")
        print("  largest unattributed:", "; ".join(f"{n} {own:.1f} s" for n, own in others.most_common(4)))
    print(f"the proxy's share of all profiled CPU time: {100 * proxy / total_all:.1f} %")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--side-by-side", action="store_true", help="the modes side by side (the default)")
    mode.add_argument("--stages", action="store_true", help="one recording (--mode) under py-spy, by stage")
    mode.add_argument("--profile", action="store_true", help="one recording under cProfile, by part")
    mode.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--processes", type=int, choices=(1, 2), default=2, help="with --profile")
    parser.add_argument("--mode", choices=tuple(MODES), default="p1", help="with --stages: the mode to record")
    parser.add_argument("--rate", type=int, default=100, help="with --stages: py-spy's samples per second")
    parser.add_argument("--modes", default="p1,p2,w2", help="the modes side by side, the first the baseline")
    parser.add_argument("--variations", default="0-2")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    low, _, high = args.variations.partition("-")
    args.variations_list = list(range(int(low), int(high or low) + 1))
    if args.one:
        print(json.dumps(record(args.variations_list, args.concurrency, args.mode)))
    elif args.stages:
        stages(args)
    elif args.profile:
        profile(args)
    else:
        side_by_side(args)


if __name__ == "__main__":
    main()
