"""Record a small suite, rejudge it under a changed rule, compare, and query the log — all from Python.

Run it with ``uv run python docs/examples/record_rejudge_query.py [LOG]``; it
needs no key and no network (the gold scripted agent plays each task's plan).
"""

from __future__ import annotations

import sys
from pathlib import Path

import fae

log = Path(sys.argv[1] if len(sys.argv) > 1 else "example.duckdb")
log.unlink(missing_ok=True)

# 1. which tasks there are (fae's suite plus any task directories or plugins)
suite = fae.tasks()
print(f"{len(suite)} tasks; recording rec-create-patient and rec-find-patient")

# 2. record: every (task, variation, agent, repeat) through the recording proxy, judged as it ends;
#    one RecordConfig says how (the stack's servers, the LLM agents' model, concurrency, where the runs go)
runs = fae.run_specs(["rec-create-patient", "rec-find-patient"], variations=[0, 1], agents=["gold"])
result = fae.record(log, runs, fae.RecordConfig(concurrency=4))
print("statuses:", dict(result.statuses))

# 3. rejudge from the log alone under a stricter ensure_record rule; verdicts are appended, never edited
rejudged = fae.rejudge(log, judge_name="ensure_record", rules={"accept_corrections": False})
print(f"rejudged {rejudged.runs} runs as batch {rejudged.batch}")

# 4. compare the default rules with the new ones, run by run
comparison = fae.compare(log, {}, {"accept_corrections": False}, judge_name="ensure_record")
for item in comparison.judges:
    print(item.judge, "flipped:", len(item.flipped))

# 5. query the log with SQL: the documented views work offline on the file alone
for row in fae.query(log, "SELECT run_id, status, tool_calls FROM run_summary ORDER BY run_id"):
    print(row["run_id"], row["status"], row["tool_calls"])
