"""`fae demo` runs the whole loop on the embedded stack with no key and no network."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from fae.cli import app
from fae.store.log import EventLog
from tests.run_report import why_not_finished


def test_demo_records_judges_rejudges_and_compares(tmp_path):
    log = tmp_path / "demo.duckdb"
    result = CliRunner().invoke(app, ["demo", "--log", str(log)])
    assert result.exit_code == 0, result.output
    assert "recorded 17 runs" in result.output and "'finished': 17" in result.output, why_not_finished(log)
    assert "1 run flipped" in result.output
    flat = " ".join(result.output.split())
    # the rejudged rule set is named by its rules, in the demo as in `fae rejudge` and `fae compare`
    assert re.search(r"│ accept_corrections=false \([0-9a-f]{8}\) │", result.output), result.output
    assert "ensure_record: defaults (" in flat and ") → accept_corrections=false (" in flat, result.output
    assert not re.search(r"\b[0-9a-f]{16}\b", result.output), "a rule set shown as a bare hash"
    assert "wv-register-patient.v0.scenario-scripted-fix.r0" in result.output
    with EventLog(log, read_only=True) as opened:
        _, rows = opened.query(
            "SELECT agent, count(*) FILTER (kind = 'LlmCalled') FROM events JOIN runs USING (run_id)"
            " GROUP BY agent ORDER BY agent"
        )
        by_agent = dict(rows)
        assert by_agent["gold"] == 0 and by_agent["langchain:baseline@scripted:gold"] > 0
        _, strict = opened.query(
            "SELECT r.agent, v.outcome FROM verdicts v JOIN runs r USING (run_id)"
            " WHERE v.judge = 'task' AND v.rule_set->>'$.mode' = 'strict' AND r.task_id = 'sched-book-appointment'"
        )
        outcomes = dict(strict)
        assert outcomes["langchain:baseline@scripted:gold"] == "pass"
        assert outcomes["langchain:baseline@scripted:wrong-answer"] == "fail"
