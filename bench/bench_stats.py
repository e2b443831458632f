"""`fae stats` and `fae report` over a log of 100,000 runs: prints how long each takes, wall and CPU.

Builds the log in the log's own schema: 4 experiments × 5 configurations × every suite task ×
34 variations × 3 trials, each run with 2-7 LLM calls (usage and timing), as many MCP tool calls
(8 % errors) and FHIR exchanges, its answer, and live verdicts (task strict and light,
failure_mode); outcomes depend on the task, the configuration and the variation, so every
variance component is non-zero. Then times the study and the report as a user runs them: each
command a fresh `python -m fae.cli` process (its imports count), wall seconds and CPU seconds (the
process and its children, user + system: the number a shared machine stretches least).

--against SRC times another revision's source tree too (`git archive REV | tar -x -C SRC`), each
command alternately with this tree's, so both see the same load; --rounds repeats that.

    uv run python bench/bench_stats.py [--runs 100000] [--keep PATH] [--against SRC] [--rounds N]
                                       [--only stats|report]
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fae.harness.task_meta import materialise_task_meta
from fae.store.log import EventLog
from fae.tasks import load_suite

CONFIGS = [
    f"langchain:{c}@bench-model" for c in ("baseline", "specs", "memory-nospec", "memory-spec", "memory-spec+specs")
]
EXPERIMENTS = ("exp1", "exp2", "exp3", "exp4")

# Generated inside DuckDB (seconds, where appending 2.5 million events from Python takes many
# minutes on a loaded machine); hash() of the run id stands in for a seeded generator.
RUNS = """
INSERT INTO runs (run_id, suite, task_id, variation, agent, agent_config, repeat, status, started_at, ended_at,
                  stop_reason, experiment, phase)
SELECT run_id, 'bench', task_id, variation, config, '{"model": "bench-model"}', trial, 'finished',
       TIMESTAMPTZ '2025-03-03 00:00:00+00' + to_seconds(n), TIMESTAMPTZ '2025-03-03 00:00:20+00' + to_seconds(n),
       'answered', experiment, 'eval'
FROM plan
"""
PLAN = """
CREATE TEMP TABLE plan AS
SELECT *, row_number() OVER () AS n,
       CAST(2 + hash(run_id || 'calls') % 6 AS INTEGER) AS calls,
       (hash(run_id) % 1000) / 1000.0
           < skill + 0.1 * ci + (CAST(hash(task_id || variation) % 400 AS INTEGER) - 200) / 1000.0
           AS passed
FROM (SELECT e.experiment, c.config, c.ci, t.task_id, t.skill, v.range AS variation, r.range AS trial,
             e.experiment || '.' || t.task_id || '.v' || v.range || '.' || c.config || '.r' || r.range AS run_id
      FROM (SELECT unnest(?) AS experiment) e,
           (SELECT unnest(?) AS config, generate_subscripts(?, 1) - 1 AS ci) c,
           (SELECT unnest(?) AS task_id, unnest(?) AS skill) t,
           range(?) v, range(3) r)
"""
EVENTS = """
INSERT INTO events
SELECT run_id, seq, kind, TIMESTAMPTZ '2025-03-03 00:00:00+00' + to_milliseconds(n * 1000 + seq), seq * 1000000,
       actor, upstream, payload
FROM (
    SELECT run_id, n, 0 AS seq, 'RunStarted' AS kind, 'harness' AS actor, NULL AS upstream,
           json_object('type', 'RunStarted', 'task_id', task_id, 'variation', variation, 'agent', config,
                       'prompt', repeat('p', 400)) AS payload FROM plan
    UNION ALL
    SELECT run_id, n, 1 + 5 * c.i, 'HttpExchanged', 'agent', 'llm',
           json_object('type', 'HttpExchanged', 'exchange_id', run_id || '-l' || c.i, 'method', 'POST',
                       'url', 'http://llm/v1/chat/completions', 'path', '/v1/chat/completions', 'status', 200,
                       'duration_ms', 300 + hash(run_id || c.i) % 900)
    FROM plan, LATERAL (SELECT unnest(range(CAST(calls AS BIGINT))) AS i) c
    UNION ALL
    SELECT run_id, n, 2 + 5 * c.i, 'LlmCalled', 'agent', 'llm',
           json_object('type', 'LlmCalled', 'exchange_id', run_id || '-l' || c.i, 'api', 'chat',
                       'model', 'bench-model', 'messages', json_array(json_object('role', 'user',
                       'content', repeat('q', 200))), 'prompt_tokens', 1500 + 400 * c.i + hash(run_id || c.i) % 300,
                       'completion_tokens', 60, 'total_tokens', 1560 + 400 * c.i + hash(run_id || c.i) % 300)
    FROM plan, LATERAL (SELECT unnest(range(CAST(calls AS BIGINT))) AS i) c
    UNION ALL
    SELECT run_id, n, 3 + 5 * c.i, 'ToolCalled', 'agent', 'mcp',
           json_object('type', 'ToolCalled', 'tool', ['searchResources', 'getResourceById', 'createResource',
                       'updateResource'][CAST(1 + hash(run_id || c.i || 't') % 4 AS INTEGER)],
                       'exchange_id', run_id || '-f' || c.i,
                       'arguments', json_object('resourceType', ['Patient', 'Slot', 'Appointment', 'Condition',
                       'Coverage', 'ServiceRequest'][CAST(1 + hash(run_id || c.i || 'r') % 6 AS INTEGER)]),
                       'result', json_object('resourceType', 'Bundle', 'total', 1),
                       'is_error', hash(run_id || c.i || 'e') % 100 < 8)
    FROM plan, LATERAL (SELECT unnest(range(CAST(calls AS BIGINT))) AS i) c
    UNION ALL
    SELECT run_id, n, 4 + 5 * c.i, 'FhirInteracted', 'agent', 'fhir',
           json_object('type', 'FhirInteracted', 'exchange_id', run_id || '-f' || c.i, 'interaction', 'search-type',
                       'resource_type', 'Patient', 'status', 200)
    FROM plan, LATERAL (SELECT unnest(range(CAST(calls AS BIGINT))) AS i) c
    UNION ALL
    SELECT run_id, n, 5 * calls + 1, 'AnswerGiven', 'agent', NULL,
           json_object('type', 'AnswerGiven', 'text', CASE WHEN passed THEN '<id>x</id>' ELSE 'no' END) FROM plan
    UNION ALL
    SELECT run_id, n, 5 * calls + 2, 'RunFinished', 'harness', NULL, json_object('type', 'RunFinished') FROM plan
)
"""
VERDICTS = """
INSERT INTO verdicts
SELECT run_id, 'task', json_object('mode', mode), mode, 'bench',
       CASE WHEN passed OR (mode = 'light' AND hash(run_id || 'light') % 10 < 3) THEN 'pass' ELSE 'fail' END,
       passed OR (mode = 'light' AND hash(run_id || 'light') % 10 < 3), '{}',
       TIMESTAMPTZ '2025-03-03 00:00:00+00' + to_seconds(n), 'live'
FROM plan, (SELECT unnest(['strict', 'light']) AS mode)
UNION ALL
SELECT run_id, 'failure_mode', '{}', 'fm', 'bench',
       CASE WHEN passed THEN 'none'
            ELSE ['tool_error', 'incorrect_order', 'other'][CAST(1 + hash(run_id) % 3 AS INTEGER)] END,
       passed, '{}', TIMESTAMPTZ '2025-03-03 00:00:00+00' + to_seconds(n), 'live'
FROM plan
"""


def build_log(path: Path, runs: int) -> int:
    rng = random.Random(7)
    tasks = list(load_suite())
    skill = [round(rng.random(), 3) for _ in tasks]
    variations = max(1, round(runs / (len(EXPERIMENTS) * len(CONFIGS) * len(tasks) * 3)))
    with EventLog(path) as log:
        con = log.con
        con.execute(PLAN, [list(EXPERIMENTS), CONFIGS, CONFIGS, tasks, skill, variations])
        for sql in (RUNS, EVENTS, VERDICTS):
            con.execute(sql)
        count = con.execute("SELECT count(*) FROM plan").fetchone()[0]
        materialise_task_meta(log)
        con.execute("CHECKPOINT")
    return count


def timed(source: Path, argv: list[str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one `python -m fae.cli` process importing fae from ``source``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    # cwd is not the repository, so ``-m`` finds fae on PYTHONPATH (this tree's or the other's)
    done = subprocess.run(
        [sys.executable, "-m", "fae.cli", *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(source)),
        check=False,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"fae {' '.join(argv)} failed ({source}): {(done.stdout + done.stderr)[-2000:]}")
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--keep", type=Path, help="Build (or reuse) the log here.")
    parser.add_argument("--against", type=Path, help="Another revision's source tree, timed alternately.")
    parser.add_argument("--rounds", type=int, default=1, help="Time every command this many times.")
    parser.add_argument("--only", choices=("stats", "report"), help="Time only `fae stats` or only `fae report`.")
    args = parser.parse_args()
    trees = {"this": Path(__file__).resolve().parents[1]}
    if args.against:
        trees["against"] = args.against.resolve()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.keep or Path(tmp) / "bench-stats.duckdb"
        if not path.exists():
            started = time.perf_counter()
            count = build_log(path, args.runs)
            print(f"built {count} runs in {time.perf_counter() - started:.1f} s ({path.stat().st_size / 1e6:.0f} MB)")
        commands = {
            "fae stats": ["stats", "--log", str(path), "--price", "bench-model=0.4/1.6"],
            "fae stats --json": ["stats", "--log", str(path), "--json"],
            "fae stats -t success": ["stats", "--log", str(path), "--table", "success"],
            "fae report": ["report", "--log", str(path)],
        }
        if args.only:
            commands = {name: argv for name, argv in commands.items() if argv[0] == args.only}
        print(
            f"{os.cpu_count()} cores; wall and CPU seconds per command ({' | '.join(trees)}); load average "
            "before each (timings stretch on a shared machine)"
        )
        pages: dict[str, set[bytes]] = {name: set() for name in trees}
        for round_ in range(args.rounds):
            for name, argv in commands.items():
                cells = []
                for tree, source in trees.items():
                    load = os.getloadavg()[0]
                    output = Path(tmp) / f"{tree}-{round_}.html"
                    wall, cpu = timed(source, argv + (["-o", str(output)] if name == "fae report" else []), Path(tmp))
                    cells.append(f"{wall:6.2f} s wall {cpu:6.2f} s CPU (load {load:4.1f})")
                    if name == "fae report":
                        pages[tree].add(output.read_bytes())
                print(f"{name:22s} " + " | ".join(cells), flush=True)
        if args.rounds > 1:
            print(
                "the same log gave the same report bytes every round: "
                + ", ".join(f"{tree} {'yes' if len(found) == 1 else 'NO'}" for tree, found in pages.items())
            )
        if len(trees) > 1 and all(pages.values()):
            print(
                "both trees wrote the same report bytes: "
                + ("yes" if len({page for found in pages.values() for page in found}) == 1 else "no")
            )


if __name__ == "__main__":
    main()
