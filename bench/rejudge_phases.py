"""Where a rejudge's CPU goes, per run: loading, what judges share (fold, capture), each judge, verdict text.

Reads a log twice in one process, as ``fae rejudge --workers 1`` does (one read-only
connection, one DuckDB thread): once loading only, once judging with the default
plan, timing each step of each run with a CPU clock. What judges share is timed
where it is first made (the capture and the fold at it, then the exchanges, the
transcript, the rendered task); a judge's time is what is left for it. Verdict
text is the JSON each row stores (rule set and evidence).

    uv run python bench/rejudge_phases.py LOG
    PYTHONPATH=/tmp/old uv run python bench/rejudge_phases.py LOG   # an older tree (git archive OLD fae)
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: PYTHONPATH=OLD measures an old tree

from fae.judge.context import RunContext
from fae.judge.judging import judges_to_run, relaxed_gc
from fae.judge.parallel import READ_MEMORY, _json
from fae.judge.rejudge import JUDGED_STATUSES
from fae.replay.source import run_ids
from fae.replay.stream import spans, stream_runs
from fae.store.log import EventLog

SHARED = (
    ("capture and the fold at it", "captured"),
    ("fold", "fold"),
    ("exchanges", "exchanges"),
    ("transcript", "transcript"),
    ("rendered task", "task"),
    ("agent's writes", "agent_writes"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path)
    args = parser.parse_args()
    clock = time.process_time
    plan = judges_to_run()
    cost: Counter[str] = Counter()
    with EventLog(args.log, read_only=True, settings={"threads": 1, "memory_limit": READ_MEMORY}) as log:
        found = spans(log, run_ids(log, statuses=JUDGED_STATUSES))
        with relaxed_gc():
            start = clock()
            runs = sum(1 for _ in stream_runs(log.con, log.path, found, lean=True))
            cost["loading alone (first pass)"] = clock() - start
            stream = stream_runs(log.con, log.path, found, lean=True)
            while True:
                start = clock()
                run = next(stream, None)
                cost["loading"] += clock() - start
                if run is None:
                    break
                context = RunContext(run)
                for name, attribute in SHARED:
                    start = clock()
                    getattr(context, attribute)
                    cost[f"shared: {name}"] += clock() - start
                for judging in plan:
                    start = clock()
                    verdict = judging.fn(context)
                    cost[f"judge {judging.name} {_json(judging.rules)}"] += clock() - start
                    start = clock()
                    _json(judging.rules)
                    _json(verdict.evidence)
                    cost["verdict text"] += clock() - start
    total = sum(seconds for name, seconds in cost.items() if name != "loading alone (first pass)")
    for name, seconds in cost.most_common():
        print(f"{1e6 * seconds / runs:8.0f} us/run  {name}")
    print(f"{1e6 * total / runs:8.0f} us/run  in all, second pass ({runs} runs)")


if __name__ == "__main__":
    main()
