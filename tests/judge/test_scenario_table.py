"""docs/judging.md holds the table of the built-in scenarios that a fresh recording gives."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from recording import BUILTIN_SCENARIOS

from fae.judge.scenario_table import current_section, replace_section, scenario_markdown, scenario_rows
from fae.replay.source import load_runs, run_ids
from fae.store.log import EventLog

PAGE = Path(__file__).resolve().parents[2] / "docs" / "judging.md"


def test_the_docs_scenario_table_is_current(scenario_log):
    with EventLog(scenario_log, read_only=True) as log:
        rows = scenario_rows(load_runs(log, run_ids(log)), datetime(2025, 1, 1, tzinfo=UTC))
    assert {r.scenario for r in rows} == set(BUILTIN_SCENARIOS)
    table = scenario_markdown(rows)
    assert current_section(PAGE.read_text(encoding="utf-8")) == table, (
        "docs/judging.md's scenario table is stale: run `uv run python scripts/scenario_table.py`"
    )


def test_a_stale_table_is_told_apart():
    page = PAGE.read_text(encoding="utf-8")
    section = current_section(page)
    changed = replace_section(page, section.replace("harmless", "harmful", 1))
    assert current_section(changed) != section and replace_section(changed, section) == page
    with pytest.raises(ValueError):
        replace_section("no markers here", section)
