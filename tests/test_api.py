"""The public API: the worked example in docs/api.md runs, and mistakes are one-line FaeErrors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import fae
from fae.errors import FaeError

EXAMPLE = Path(__file__).parent.parent / "docs" / "examples" / "record_rejudge_query.py"


def test_the_worked_example_records_rejudges_compares_and_queries(tmp_path):
    log = tmp_path / "example.duckdb"
    done = subprocess.run([sys.executable, str(EXAMPLE), str(log)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"the example failed:\n{done.stdout}\n{done.stderr}"
    assert "statuses: {'finished': 4}" in done.stdout, done.stdout
    assert "rejudged 4 runs" in done.stdout
    rows = fae.query(
        log,
        "SELECT count(*) AS n FROM verdicts WHERE judge = 'ensure_record'"
        " AND rule_set->>'$.accept_corrections' = 'false'",
    )
    assert rows == [{"n": 4}]


def test_every_public_name_resolves_and_unknown_ones_do_not():
    for name in fae.__all__:
        assert getattr(fae, name) is not None, name
    with pytest.raises(AttributeError):
        fae.no_such_thing  # noqa: B018


def test_user_mistakes_are_fae_errors(tmp_path):
    with pytest.raises(FaeError, match="no log at"):
        fae.query(tmp_path / "missing.duckdb", "SELECT 1")
    with pytest.raises(FaeError, match="no task 'nope'"):
        fae.run_specs(["nope"])
    with pytest.raises(FaeError, match="at least one task"):
        fae.run_specs([])


def test_stats_from_python_match_the_recorded_verdicts(tmp_path):
    log = tmp_path / "s.duckdb"
    fae.record(log, fae.run_specs(["rec-find-patient"], variations=[0, 1], agents=["gold"]))
    study = fae.stats(log, tables=["success"])
    rows = study.tables["success"].dicts()
    assert rows and all(row["strict_mean"] == 100.0 for row in rows), rows
    written = fae.write_report(log, tmp_path / "r.html")
    assert written.read_text().startswith("<!DOCTYPE html>") or "<html" in written.read_text()[:200]
