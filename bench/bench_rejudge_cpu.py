"""CPU cost per run of ``fae rejudge --workers 1``: this tree against an older one, side by side, taking turns.

The machine may be shared and loaded, so the two trees run in alternation, each
in a fresh process on its own copy of the log, and what is compared is CPU time
(the whole process, Python's import of fae included, and the judging alone),
with the load average at each turn. Make the older tree with ``git archive``:

    mkdir -p /tmp/old && git archive OLD_COMMIT fae | tar -x -C /tmp/old
    uv run python bench/bench_rejudge_cpu.py LOG --before /tmp/old [--rounds 3] [--workers 1]

With ``--workers N`` the CPU is every process's (each worker reports its own) and the
wall time is the number to compare.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent

_CHILD = """
import json, resource, sys, time
wall = time.perf_counter()
from fae.judge.rejudge import rejudge
result = rejudge(sys.argv[1], workers=int(sys.argv[2]))
wall = time.perf_counter() - wall
own = resource.getrusage(resource.RUSAGE_SELF)
worker_cpu = sum(shard.cpu_s for shard in result.shards[1:])  # judged in worker processes, which report their own
print(json.dumps({"runs": result.runs, "cpu_s": own.ru_utime + own.ru_stime + worker_cpu,
                  "judge_cpu_s": sum(shard.cpu_s for shard in result.shards), "wall_s": wall}))
"""


def one(tree: Path, log: Path, workers: int = 1) -> dict:
    """Rejudge a copy of the log with the fae of ``tree`` in a fresh process; what it cost."""
    with tempfile.TemporaryDirectory(prefix="fae-bench-cpu-") as folder:
        copy = Path(folder) / "log.duckdb"
        shutil.copy(log, copy)
        env = {**os.environ, "PYTHONPATH": str(tree)}
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, str(copy), str(workers)], capture_output=True, text=True, env=env, cwd=folder
        )
    if done.returncode:
        raise SystemExit(f"rejudge with {tree} failed:\n{done.stderr[-3000:]}")
    found = json.loads(done.stdout.strip().splitlines()[-1])
    found["load"] = os.getloadavg()[0]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path)
    parser.add_argument("--before", type=Path, required=True, help="a directory holding the older fae package")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=1, help="as `fae rejudge --workers` (CPU: every process's)")
    args = parser.parse_args()
    if not (args.before / "fae" / "__init__.py").exists():
        raise SystemExit(f"{args.before} holds no fae package (git archive OLD fae | tar -x -C {args.before})")
    trees = {"before": args.before.resolve(), "after": HERE}
    found: dict[str, list[dict]] = {name: [] for name in trees}
    print(
        f"{'round':>5} {'tree':>6} {'runs':>7} {'CPU s':>7} {'judging CPU s':>13} {'runs/CPU-s':>10} "
        f"{'judging us/run':>14} {'wall s':>7} {'load':>5}"
    )
    for index in range(args.rounds):
        for name, tree in trees.items():
            row = one(tree, args.log, args.workers)
            found[name].append(row)
            print(
                f"{index + 1:>5} {name:>6} {row['runs']:>7} {row['cpu_s']:>7.2f} {row['judge_cpu_s']:>13.2f} "
                f"{row['runs'] / row['cpu_s']:>10.0f} {1e6 * row['judge_cpu_s'] / row['runs']:>14.0f} "
                f"{row['wall_s']:>7.1f} {row['load']:>5.1f}"
            )
    ratios = [b["cpu_s"] / a["cpu_s"] for b, a in zip(found["before"], found["after"], strict=True)]
    judging = [b["judge_cpu_s"] / a["judge_cpu_s"] for b, a in zip(found["before"], found["after"], strict=True)]
    walls = [b["wall_s"] / a["wall_s"] for b, a in zip(found["before"], found["after"], strict=True)]
    print(
        f"after vs before, runs per wall-second: {statistics.median(walls):.2f}x "
        f"(rounds {', '.join(f'{r:.2f}' for r in walls)})"
    )
    print(
        f"after vs before, runs per CPU-second: whole process {statistics.median(ratios):.2f}x "
        f"(rounds {', '.join(f'{r:.2f}' for r in ratios)}), judging alone {statistics.median(judging):.2f}x "
        f"(rounds {', '.join(f'{r:.2f}' for r in judging)})"
    )


if __name__ == "__main__":
    main()
