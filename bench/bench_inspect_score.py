"""fae's rejudge against Inspect AI's ``inspect score``, side by side in one run, on logs of the same size.

Inspect AI is not a dependency of fae: install it in a virtual environment of its own and name its Python,

    uv venv -p python3.12 /tmp/inspect-venv && uv pip install --python /tmp/inspect-venv/bin/python inspect-ai
    uv run python bench/bench_inspect_score.py --inspect-python /tmp/inspect-venv/bin/python \\
        [--sizes 2000,10000] [--rounds 2] [--keep DIR] [--logs /tmp/benchlogs] [--scorer match]

For each size N it needs fae's grown log ``LOGS/grown-N-own.duckdb`` (made by ``bench/bench_rejudge.py --keep
LOGS``; read only here, every measured command gets a fresh copy) and writes, once, an Inspect .eval log of N
samples with bench/inspect_eval_log.py (run by Inspect's Python; kept in --keep): each sample about as much
FHIR-like content as a fae run's events and bodies (measured on the fae log). Then, round after round, each in
a fresh process, with CPU seconds of the whole process tree (RUSAGE_CHILDREN of a wrapper around it), wall time
and peak RSS (the largest process of the tree). Both sides' Python is compiled to bytecode first and the
measured processes may use it (``--no-bytecode`` keeps PYTHONDONTWRITEBYTECODE if set: each process then
compiles every module it imports, seconds for Inspect):

  inspect         ``inspect score LOG --scorer match --action append --output-file NEW``: reads the whole log,
                  scores every sample, writes a new scored log
  inspect-stream  the same with ``--stream 100`` (--stream): samples read, scored and written 100 at a time
                  instead of the whole log in memory (a bare ``--stream`` holds every sample at once)
  fae-full        ``fae rejudge --full --from-events --workers 1``: six default judges, every run read
  fae-onerule     ``fae rejudge --rule accept_corrections=false --workers 1`` on a copy that holds the default
                  judges' verdicts and findings (made in this run, so they carry this tree's CODE_VERSION)

The machine may be shared: compare the ratios within one run, not across runs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import duckdb

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
TOOLS = ("inspect", "inspect-stream", "fae-full", "fae-onerule")

# Runs a command and reports the CPU and peak RSS of its whole process tree: this wrapper has no other child.
_WRAP = """
import json, resource, subprocess, sys, time
began = time.perf_counter()
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
wall = time.perf_counter() - began
use = resource.getrusage(resource.RUSAGE_CHILDREN)
out = done.stdout if len(done.stdout) <= 4000 else done.stdout[:3000] + done.stdout[-1000:]
print(json.dumps({"rc": done.returncode, "out": out, "err": done.stderr[-3000:], "wall_s": wall,
                  "cpu_s": use.ru_utime + use.ru_stime, "rss_mib": use.ru_maxrss / 1024}))
"""


ENV = dict(os.environ)


def measure(command: list[str], cwd: Path) -> dict:
    """Run ``command`` in a fresh wrapper process; what its process tree cost."""
    done = subprocess.run([sys.executable, "-c", _WRAP, *command], capture_output=True, text=True, cwd=cwd, env=ENV)
    if done.returncode:
        raise SystemExit(f"the measuring wrapper failed: {done.stderr.strip()[-500:]}")
    found = json.loads(done.stdout)
    if found["rc"]:
        raise SystemExit(f"{' '.join(command[:3])} ... exited {found['rc']}: {(found['err'] or found['out'])[-1500:]}")
    found["load"] = os.getloadavg()[0]
    return found


def fae_bytes_per_run(path: Path) -> tuple[int, float, float]:
    """Runs judged, and the mean bytes a run carries: its events' payloads, and the distinct bodies they name."""
    with duckdb.connect(str(path), read_only=True) as con:
        [(runs,)] = con.execute("SELECT count(*) FROM runs WHERE status = 'finished'").fetchall()
        [(events,)] = con.execute("SELECT sum(strlen(payload::VARCHAR)) FROM events").fetchall()
        [(bodies,)] = con.execute(
            """WITH refs AS (SELECT DISTINCT run_id, hash FROM (
                 SELECT run_id, unnest([payload->>'request_blob', payload->>'response_blob', payload->>'decoded_blob'])
                 AS hash FROM events) WHERE hash IS NOT NULL)
               SELECT sum(size) FROM refs JOIN blobs USING (hash)"""
        ).fetchall()
    return runs, events / runs, (bodies or 0) / runs


def fresh_copy(source: Path, folder: Path, name: str) -> Path:
    """A copy of a fae log (and any side-file bodies) that a measured command may write into."""
    copy = folder / name
    drop(copy)
    shutil.copy(source, copy)
    side = source.with_name(source.name + ".bodies")
    if side.is_dir():
        shutil.copytree(side, copy.with_name(copy.name + ".bodies"))
    return copy


def drop(path: Path) -> None:
    for leftover in (path, path.with_name(path.name + ".wal")):
        leftover.unlink(missing_ok=True)
    shutil.rmtree(path.with_name(path.name + ".bodies"), ignore_errors=True)


def rejudged(out: str) -> int:
    found = re.search(r"rejudged (\d+) (?:of \d+ )?runs", out)
    if not found:
        raise SystemExit(f"fae rejudge said no 'rejudged N runs': {out[-500:]}")
    return int(found.group(1))


def inspect_log(python: Path, folder: Path, size: int, sample_bytes: int) -> Path:
    """The kept Inspect log of ``size`` samples (written once; a kept one is read back and checked)."""
    path = folder / f"inspect-{size}-{sample_bytes // 1024}k.eval"
    command = [str(python), str(HERE / "inspect_eval_log.py"), str(path), str(size), f"--sample-bytes={sample_bytes}"]
    kept = path.exists()
    found = measure(command + (["--check"] if kept else []), folder)
    made = json.loads(found["out"].strip().splitlines()[-1])
    verb = "kept, read back" if kept else "built and read back"
    print(
        f"  Inspect log {path.name}: {verb} in {found['wall_s']:.0f} s ({found['cpu_s']:.0f} CPU-s, peak RSS "
        f"{found['rss_mib']:.0f} MiB), {path.stat().st_size / size / 1024:.1f} KiB a sample as stored; "
        f"last sample: {made['messages']} messages, {made['events']} events"
    )
    return path


def compile_bytecode(inspect_python: Path) -> None:
    """Compile both sides' Python once (Inspect's venv; fae's venv and package), as a first import would."""
    began = time.perf_counter()
    where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    for python, extra in ((str(inspect_python), []), ("python", [str(REPO / "fae")])):
        prefix = [] if python != "python" else ["uv", "run"]
        lib = subprocess.run([*prefix, python, "-c", where], capture_output=True, text=True, cwd=REPO, check=True)
        subprocess.run([*prefix, python, "-m", "compileall", "-q", lib.stdout.strip(), *extra], cwd=REPO, env=ENV,
                       stdout=subprocess.DEVNULL)  # fmt: skip
    print(f"compiled both sides' bytecode in {time.perf_counter() - began:.0f} s (--no-bytecode: without it)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inspect-python", type=Path, required=True, help="the Python of a venv with inspect-ai")
    parser.add_argument("--sizes", default="2000,10000", help="comma-separated run counts")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--keep", type=Path, default=Path("/tmp/fae-bench-inspect"), help="Inspect logs, copies")
    parser.add_argument("--logs", type=Path, default=Path("/tmp/benchlogs"), help="holds grown-N-own.duckdb")
    parser.add_argument("--scorer", default="match", help="an Inspect scorer reading each sample's output and target")
    parser.add_argument("--stream", type=int, default=100, help="inspect-stream: samples scored at once")
    parser.add_argument("--tools", default=",".join(TOOLS), help=f"some of {','.join(TOOLS)}")
    parser.add_argument(
        "--no-bytecode",
        action="store_true",
        help="keep PYTHONDONTWRITEBYTECODE as set: every process compiles what it imports (by default the bench "
        "compiles both sides once and lets the measured processes use and write the caches)",
    )
    args = parser.parse_args()
    inspect = args.inspect_python.with_name("inspect")
    if not args.inspect_python.is_file() or not inspect.is_file():
        raise SystemExit(
            f"no Inspect AI at {args.inspect_python} (wanted {inspect} beside it): install inspect-ai there"
        )
    tools = args.tools.split(",")
    if unknown := set(tools) - set(TOOLS):
        raise SystemExit(f"unknown tools {sorted(unknown)}: choose from {','.join(TOOLS)}")
    sizes = [int(s) for s in args.sizes.split(",")]
    grown = {size: args.logs / f"grown-{size}-own.duckdb" for size in sizes}
    if missing := [str(path) for path in grown.values() if not path.is_file()]:
        raise SystemExit(f"no fae log {', '.join(missing)}: grow it with bench/bench_rejudge.py --keep {args.logs}")
    version = subprocess.run([str(args.inspect_python), "-c", "import inspect_ai; print(inspect_ai.__version__)"],
                             capture_output=True, text=True)  # fmt: skip
    if version.returncode:
        raise SystemExit(f"{args.inspect_python} cannot import inspect_ai: {version.stderr.strip()[-300:]}")
    args.keep.mkdir(parents=True, exist_ok=True)
    if not args.no_bytecode:
        ENV.pop("PYTHONDONTWRITEBYTECODE", None)
        compile_bytecode(args.inspect_python)
    print(f"inspect-ai {version.stdout.strip()}, scorer {args.scorer}; fae at {REPO}; {os.cpu_count()} cores")
    table = []
    for size in sizes:
        runs, events, bodies = fae_bytes_per_run(grown[size])
        print(
            f"\n== {size}: fae log {grown[size].name}: {runs} runs, {(events + bodies) / 1024:.1f} KiB a run "
            f"(events {events / 1024:.1f} KiB, bodies {bodies / 1024:.1f} KiB), "
            f"{grown[size].stat().st_size / runs / 1024:.1f} KiB a run as stored"
        )
        log = inspect_log(args.inspect_python, args.keep, size, int(events + bodies))
        prejudged = None
        if "fae-onerule" in tools:  # the default judges' verdicts and findings, under this tree's CODE_VERSION
            prejudged = fresh_copy(grown[size], args.keep, f"prejudged-{size}.duckdb")
            made = measure(["uv", "run", "fae", "rejudge", "--full", "--workers", "1", "--log", str(prejudged)], REPO)
            print(f"  prejudged copy made in {made['wall_s']:.0f} s")
        found: dict[str, list[dict]] = {tool: [] for tool in tools}
        for index in range(args.rounds):
            for tool in tools:
                if tool.startswith("inspect"):
                    out = args.keep / f"scored-{size}.eval"
                    out.unlink(missing_ok=True)
                    command = [str(inspect), "score", str(log), "--scorer", args.scorer, "--action", "append"]
                    command += ["--output-file", str(out), "--display", "none", "--log-level", "error"]
                    stream = ["--stream", str(args.stream)] if tool == "inspect-stream" else []
                    row = measure(command + stream, args.keep)
                    row["runs"] = size
                    if index == 0:
                        check = measure([str(args.inspect_python), "-c", _SCORED, str(out), str(size)], args.keep)
                        print(f"  {tool}: {check['out'].strip()}")
                    out.unlink(missing_ok=True)
                else:
                    source = prejudged if tool == "fae-onerule" else grown[size]
                    copy = fresh_copy(source, args.keep, f"judging-{size}.duckdb")
                    command = ["uv", "run", "fae", "rejudge", "--workers", "1", "--log", str(copy)]
                    command += (
                        ["--rule", "accept_corrections=false"] if tool == "fae-onerule" else ["--full", "--from-events"]
                    )
                    row = measure(command, REPO)
                    row["runs"] = rejudged(row["out"])
                    if tool == "fae-onerule" and f"{row['runs']} of them decided from the findings" not in row["out"]:
                        raise SystemExit(
                            f"fae-onerule read runs' events: the copy keeps no findings: {row['out'][:500]}"
                        )
                    drop(copy)
                found[tool].append(row)
                print(
                    f"  round {index + 1} {tool:14} {row['runs']:>7} runs {row['cpu_s']:7.2f} CPU-s "
                    f"{row['runs'] / row['cpu_s']:7.0f} runs/CPU-s {row['wall_s']:7.1f} s "
                    f"{row['rss_mib']:6.0f} MiB  load {row['load']:.1f}"
                )
        if prejudged is not None:
            drop(prejudged)
        table.append((size, found))
    report(table)


_SCORED = """
import sys
from inspect_ai.log import read_eval_log
log = read_eval_log(sys.argv[1], header_only=True)
scores = {s.name: {k: round(m.value, 4) for k, m in s.metrics.items()} for s in log.results.scores}
assert log.results.total_samples == int(sys.argv[2]), log.results
print(f"scored log holds {log.results.total_samples} samples, scores {scores}")
"""


def report(table: list[tuple[int, dict[str, list[dict]]]]) -> None:
    """The medians of the rounds as a Markdown table, and fae's CPU against Inspect's in the same rounds."""
    print("\n| N | tool | runs (samples) | CPU-s | runs per CPU-second | wall s | peak RSS MiB |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for size, found in table:
        for tool, rows in found.items():
            cpu = statistics.median(r["cpu_s"] for r in rows)
            print(
                f"| {size:,} | {tool} | {rows[0]['runs']:,} | {cpu:.2f} | {rows[0]['runs'] / cpu:,.0f} | "
                f"{statistics.median(r['wall_s'] for r in rows):.1f} | {max(r['rss_mib'] for r in rows):.0f} |"
            )
    print("\nInspect's CPU per run over fae's, round by round (>1: fae uses less):")
    for size, found in table:
        for mine in (t for t in found if t.startswith("fae")):
            for theirs in (t for t in found if t.startswith("inspect")):
                ratios = [
                    (b["cpu_s"] / b["runs"]) / (a["cpu_s"] / a["runs"])
                    for a, b in zip(found[mine], found[theirs], strict=True)
                ]
                print(f"  {size:,}: {theirs} / {mine}: " + ", ".join(f"{r:.1f}x" for r in ratios))


if __name__ == "__main__":
    main()
