"""Record the built-in write-verification scenarios and write their table into docs/judging.md.

Usage: uv run python scripts/scenario_table.py [--check]
With --check, exit 1 when the page's table differs from a fresh recording's (the page is left alone).
"""

from __future__ import annotations

import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import anyio

from fae.harness.config import RecordConfig
from fae.harness.suite_runner import record_suite
from fae.harness.worklist import suite_specs
from fae.judge.scenario_table import current_section, replace_section, scenario_markdown, scenario_rows
from fae.replay.source import load_runs, run_ids
from fae.store.log import EventLog
from fae.tasks.scenarios import builtin_registry

PAGE = Path(__file__).resolve().parent.parent / "docs" / "judging.md"


def main(check: bool) -> int:
    registry = builtin_registry()
    specs = []
    for task_id in registry.tasks:
        agents = [f"scenario:{name}" for name, (task, _, _) in registry.scenarios.items() if task == task_id]
        specs += suite_specs([task_id], [0], agents, 1, "write-verification")
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "scenarios.duckdb"
        result = anyio.run(lambda: record_suite(log, specs, RecordConfig(concurrency=8)))
        if result.statuses.get("finished", 0) != len(specs):
            print(f"not every scenario finished: {dict(result.statuses)}", file=sys.stderr)
            return 1
        with EventLog(log, read_only=True) as opened:
            rows = scenario_rows(load_runs(opened, run_ids(opened)), datetime.now(UTC))
    table = scenario_markdown(rows)
    page = PAGE.read_text(encoding="utf-8")
    if check:
        if current_section(page) != table:
            print("docs/judging.md's scenario table is stale: run scripts/scenario_table.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(replace_section(page, table), encoding="utf-8")
    print(f"wrote {len(rows)} scenarios into {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main("--check" in sys.argv[1:]))
